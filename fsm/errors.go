package fsm

import (
	"errors"
	"fmt"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Reason is a machine-readable error reason. The API maps each to a Connect
// code and carries the reason itself in an error detail.
type Reason string

const (
	ReasonNotFound        Reason = "NOT_FOUND"
	ReasonInvalidArgument Reason = "INVALID_ARGUMENT"
	ReasonSeqMismatch     Reason = "SEQ_MISMATCH"
	ReasonSessionStopped  Reason = "SESSION_STOPPED"
	ReasonAlreadyExists   Reason = "ALREADY_EXISTS"
	ReasonNotStopped      Reason = "NOT_STOPPED" // a purge of a session still active
	// The attachment contract's refusals (DESIGN.md §7); TURN_ORDER fences
	// runner writes (§8) and BUDGET_EXHAUSTED is the envelope's (§5).
	ReasonStaleEpoch         Reason = "STALE_EPOCH"
	ReasonLeaseNotHeld       Reason = "LEASE_NOT_HELD"
	ReasonLeaseHeld          Reason = "LEASE_HELD"
	ReasonAttachmentNotFound Reason = "ATTACHMENT_NOT_FOUND"
	ReasonBusy               Reason = "BUSY"
	ReasonNoPendingApproval  Reason = "NO_PENDING_APPROVAL"
	ReasonTurnOrder          Reason = "TURN_ORDER"
	ReasonBudgetExhausted    Reason = "BUDGET_EXHAUSTED"
	// An interrupt with no turn running (turn.interrupt).
	ReasonNoTurnRunning Reason = "NO_TURN_RUNNING"
	// The session's agent runs outside the fleet (the external runtime of a
	// guarded launch): the fleet can neither send it input, interrupt it
	// nor move it.
	ReasonExternalRuntime Reason = "EXTERNAL_RUNTIME"
	// The session's runtime decides tool approvals by its own policy (a
	// codex sandbox level, a gemini approval mode): fak asks no client.
	ReasonRuntimeDecides Reason = "RUNTIME_DECIDES"
	// A placement names a runtime no node of the fleet advertises, or one
	// the named node lacks: nothing could ever run the session.
	ReasonNoSuchRuntime Reason = "NO_SUCH_RUNTIME"
	// A placement names a node its record says admits no session: it is
	// draining (the admission check CheckNotDraining).
	ReasonNotAdmitted Reason = "NOT_ADMITTED"
	// Moves (DESIGN.md §8).
	ReasonMoveState      Reason = "MOVE_STATE" // a transition not allowed from the move's state
	ReasonMoveUnsafe     Reason = "MOVE_UNSAFE"
	ReasonDigestMismatch Reason = "DIGEST_MISMATCH"
	// The workspace a destination assembled does not match the digest the
	// checkpoint committed (a chunk or the manifest altered on the way):
	// the move fails, the source stays authoritative.
	ReasonWorkspaceDigestMismatch Reason = "WORKSPACE_DIGEST_MISMATCH"
	// Reasons only the capability set gives (capabilities.go): why a
	// control is not offered, where no command has been refused yet.
	ReasonNotAttached    Reason = "NOT_ATTACHED"      // the caller has no attachment
	ReasonAlreadyHeld    Reason = "ALREADY_HELD"      // the caller holds the lease it would take
	ReasonNotHeldByOther Reason = "NOT_HELD_BY_OTHER" // there is no other holder to steal from
	// The caller's token role is below the one the control needs (the API
	// refuses the call itself with the same reason).
	ReasonPermissionDenied Reason = "PERMISSION_DENIED"
)

// Error is a domain error produced by Apply or a read. It travels through
// Raft as part of a Result, so it is plain data.
type Error struct {
	Reason  Reason
	Message string
	// HeadSeq is the journal head for SEQ_MISMATCH.
	HeadSeq uint64
}

func (e *Error) Error() string { return string(e.Reason) + ": " + e.Message }

func errorf(reason Reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// ReasonOf returns the reason of a domain error, or "" for other errors.
func ReasonOf(err error) Reason {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Reason
	}
	return ""
}

func (e *Error) toProto() *fsmpb.Error {
	return &fsmpb.Error{Reason: string(e.Reason), Message: e.Message, HeadSeq: e.HeadSeq}
}

// ResultError returns the domain error carried by a result, or nil.
func ResultError(r *fsmpb.Result) error {
	if r == nil || r.Error == nil {
		return nil
	}
	return &Error{Reason: Reason(r.Error.Reason), Message: r.Error.Message, HeadSeq: r.Error.HeadSeq}
}
