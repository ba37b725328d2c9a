package fsm

import "slices"

// Event kinds of the journal (DESIGN.md §4). Kinds are typed: an append with
// a kind outside this vocabulary is refused with INVALID_ARGUMENT. Each kind
// has one writer, so the journal's facts can be trusted: the FSM itself
// (lifecycle, attachments, leases, accepted input, approvals), the runner of
// the current execution epoch (turns, output, tools), or any client
// (annotations).
const (
	KindSessionCreated   = "session.created"
	KindSessionStopped   = "session.stopped"
	KindEpochChanged     = "epoch.changed"
	KindAttachmentJoined = "attachment.joined"
	KindAttachmentLeft   = "attachment.left"
	KindLeaseTaken       = "lease.taken"
	KindLeaseReleased    = "lease.released"
	KindInput            = "input"
	KindApprovalAnswered = "approval.answered"
	KindResetBoundary    = "reset_boundary"
	KindProviderBoundary = "fak.session.provider_boundary.v1"
	KindProviderBound    = "provider.bound"
	KindProviderEnd      = "provider.session_end"
	KindCompaction       = "compaction"
	KindBudgetCharged    = "budget.charged"
	KindBudgetExhausted  = "budget.exhausted"
	KindSessionForked    = "session.forked"
	KindSessionStranded  = "session.stranded"

	KindMoveRequested    = "move.requested"
	KindMoveCheckpointed = "move.checkpointed"
	KindMoveAdmitted     = "move.admitted"
	KindMoveRestored     = "move.restored"
	KindMoveCutover      = "move.cutover"
	KindMoveFailed       = "move.failed"
	KindMoveUnsafe       = "move.unsafe"
	KindMoveWarmed       = "move.warmed"

	KindTurnStarted       = "turn.started"
	KindOutput            = "output"
	KindTurnCompleted     = "turn.completed"
	KindToolCall          = "tool.call"
	KindToolResult        = "tool.result"
	KindApprovalRequested = "approval.requested"

	KindNote       = "note"
	KindCheckpoint = "checkpoint"
)

// systemKinds are written only by the FSM itself, as the effect of a typed
// command (SubmitInput writes input, TakeLease writes lease.taken, ...).
var systemKinds = map[string]bool{
	KindSessionCreated:   true,
	KindSessionStopped:   true,
	KindEpochChanged:     true,
	KindAttachmentJoined: true,
	KindAttachmentLeft:   true,
	KindLeaseTaken:       true,
	KindLeaseReleased:    true,
	KindInput:            true,
	KindApprovalAnswered: true,
	KindResetBoundary:    true,
	KindProviderBoundary: true,
	KindProviderBound:    true,
	KindProviderEnd:      true,
	KindBudgetCharged:    true,
	KindBudgetExhausted:  true,
	KindSessionForked:    true,
	KindSessionStranded:  true,
	KindMoveRequested:    true,
	KindMoveCheckpointed: true,
	KindMoveAdmitted:     true,
	KindMoveRestored:     true,
	KindMoveCutover:      true,
	KindMoveFailed:       true,
	KindMoveUnsafe:       true,
	KindMoveWarmed:       true,
}

// runnerKinds are written by the runner of the current epoch (RunnerAppend).
var runnerKinds = map[string]bool{
	KindTurnStarted:       true,
	KindOutput:            true,
	KindTurnCompleted:     true,
	KindToolCall:          true,
	KindToolResult:        true,
	KindApprovalRequested: true,
}

// clientKinds may be appended through AppendEvents by any client.
var clientKinds = map[string]bool{
	KindNote:       true,
	KindCheckpoint: true,
	KindCompaction: true,
}

// AppendableKind reports whether clients may append events of this kind.
func AppendableKind(kind string) bool { return clientKinds[kind] }

// RunnerKind reports whether kind is written by runners.
func RunnerKind(kind string) bool { return runnerKinds[kind] }

// Kinds lists the whole journal vocabulary, sorted. Clients keep their own
// copy (client/journal), whose tests compare it with this list.
func Kinds() []string {
	var kinds []string
	for _, set := range []map[string]bool{systemKinds, runnerKinds, clientKinds} {
		for k := range set {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

// KnownKind reports whether kind is in the journal vocabulary at all.
func KnownKind(kind string) bool { return clientKinds[kind] || systemKinds[kind] || runnerKinds[kind] }
