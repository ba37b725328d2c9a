// Package journal is the client side of the journal's vocabulary: the
// event kinds, the typed facts fak writes in an event's data, and one
// Summary of an event that every client prints (fakctl session log, the
// terminal client). The writer's side is fsm (fsm/kinds.go, fsm/facts.go);
// this package depends on the API's generated types only, and its tests
// check that it decodes every fact fsm writes.
package journal

import "slices"

// Event kinds of the journal (fsm/kinds.go).
const (
	// Written by the FSM itself, as the effect of a typed command.
	KindSessionCreated   = "session.created"
	KindSessionStopped   = "session.stopped"
	KindEpochChanged     = "epoch.changed"
	KindAttachmentJoined = "attachment.joined"
	KindAttachmentLeft   = "attachment.left"
	KindLeaseTaken       = "lease.taken"
	KindLeaseReleased    = "lease.released"
	KindInput            = "input"
	KindApprovalAnswered = "approval.answered"
	// The reset ledger, provider hooks and budgets (DESIGN.md §5).
	KindResetBoundary    = "reset_boundary"
	KindProviderBoundary = "fak.session.provider_boundary.v1"
	KindProviderBound    = "provider.bound"
	KindProviderEnd      = "provider.session_end"
	KindCompaction       = "compaction" // also a client annotation
	KindBudgetCharged    = "budget.charged"
	KindBudgetExhausted  = "budget.exhausted"
	KindSessionForked    = "session.forked"
	KindSessionStranded  = "session.stranded"
	// Moves (DESIGN.md §8): one event per transition of the move machine.
	KindMoveRequested    = "move.requested"
	KindMoveCheckpointed = "move.checkpointed"
	KindMoveAdmitted     = "move.admitted"
	KindMoveRestored     = "move.restored"
	KindMoveCutover      = "move.cutover"
	KindMoveFailed       = "move.failed"
	KindMoveUnsafe       = "move.unsafe"
	// After a move: its first turn in the new epoch completed (warm-up).
	KindMoveWarmed = "move.warmed"

	// Written by the runner of the current epoch.
	KindTurnStarted       = "turn.started"
	KindOutput            = "output"
	KindTurnCompleted     = "turn.completed"
	KindToolCall          = "tool.call"
	KindToolResult        = "tool.result"
	KindApprovalRequested = "approval.requested"

	// Appended by any client.
	KindNote       = "note"
	KindCheckpoint = "checkpoint"
)

// kinds is the vocabulary, sorted.
var kinds = func() []string {
	k := []string{
		KindSessionCreated, KindSessionStopped, KindEpochChanged, KindAttachmentJoined, KindAttachmentLeft,
		KindLeaseTaken, KindLeaseReleased, KindInput, KindApprovalAnswered,
		KindResetBoundary, KindProviderBoundary, KindProviderBound, KindProviderEnd, KindCompaction,
		KindBudgetCharged, KindBudgetExhausted, KindSessionForked, KindSessionStranded,
		KindMoveRequested, KindMoveCheckpointed, KindMoveAdmitted, KindMoveRestored, KindMoveCutover,
		KindMoveFailed, KindMoveUnsafe, KindMoveWarmed,
		KindTurnStarted, KindOutput, KindTurnCompleted, KindToolCall, KindToolResult, KindApprovalRequested,
		KindNote, KindCheckpoint,
	}
	slices.Sort(k)
	return k
}()

// Kinds lists every event kind of the journal, sorted.
func Kinds() []string { return slices.Clone(kinds) }

// Known reports whether kind is in the journal's vocabulary.
func Known(kind string) bool {
	_, ok := slices.BinarySearch(kinds, kind)
	return ok
}

// IsMove reports whether kind is a transition of a move (move.*).
func IsMove(kind string) bool {
	switch kind {
	case KindMoveRequested, KindMoveCheckpointed, KindMoveAdmitted, KindMoveRestored,
		KindMoveCutover, KindMoveFailed, KindMoveUnsafe:
		return true
	}
	return false
}
