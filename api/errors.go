package api

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/fsm"
)

// Reasons produced by the API layer itself (domain reasons come from fsm).
const (
	ReasonNotLeader     = "NOT_LEADER"
	ReasonNoLeader      = "NO_LEADER"
	ReasonIndeterminate = "INDETERMINATE"
	ReasonShuttingDown  = "SHUTTING_DOWN"
	ReasonUnauth        = "UNAUTHENTICATED"
	// A valid token whose role is below the one the procedure needs.
	ReasonPermissionDenied = "PERMISSION_DENIED"
	ReasonInvalid          = "INVALID_ARGUMENT"
	ReasonNotFound         = "NOT_FOUND"
)

var reasonCodes = map[fsm.Reason]connect.Code{
	fsm.ReasonNotFound:        connect.CodeNotFound,
	fsm.ReasonInvalidArgument: connect.CodeInvalidArgument,
	fsm.ReasonSeqMismatch:     connect.CodeAborted,
	fsm.ReasonSessionStopped:  connect.CodeFailedPrecondition,
	fsm.ReasonAlreadyExists:   connect.CodeAlreadyExists,
	// A different epoch, lease or attachment than the client assumed: the
	// client must re-describe before retrying.
	fsm.ReasonStaleEpoch:         connect.CodeFailedPrecondition,
	fsm.ReasonLeaseNotHeld:       connect.CodeFailedPrecondition,
	fsm.ReasonLeaseHeld:          connect.CodeFailedPrecondition,
	fsm.ReasonAttachmentNotFound: connect.CodeNotFound,
	fsm.ReasonBusy:               connect.CodeFailedPrecondition,
	fsm.ReasonNoPendingApproval:  connect.CodeFailedPrecondition,
	fsm.ReasonTurnOrder:          connect.CodeFailedPrecondition,
	fsm.ReasonBudgetExhausted:    connect.CodeResourceExhausted,
	// Interrupting with no turn running; acting on an agent the fleet does
	// not run; a placement on a runtime no node has. The session's state
	// (or the fleet's) decides, not the request's form.
	fsm.ReasonNoTurnRunning:   connect.CodeFailedPrecondition,
	fsm.ReasonExternalRuntime: connect.CodeFailedPrecondition,
	fsm.ReasonRuntimeDecides:  connect.CodeFailedPrecondition,
	fsm.ReasonNoSuchRuntime:   connect.CodeFailedPrecondition,
	fsm.ReasonNotAdmitted:     connect.CodeFailedPrecondition,
	// This node's build stopped at rules it does not have (fsm/rules.go):
	// another node, or this one upgraded, can serve.
	fsm.ReasonRulesUnknown: connect.CodeUnavailable,
	// This node's last write of its database failed (a full disk): the
	// agent exits, another node serves.
	fsm.ReasonStorageFailed: connect.CodeUnavailable,
	// A feature whose rules some voters' builds lack: the fleet is being
	// upgraded.
	fsm.ReasonUpgradeInProgress: connect.CodeFailedPrecondition,
}

// newError builds a Connect error carrying an ErrorInfo detail.
func newError(code connect.Code, info *fakv1.ErrorInfo, msg string) *connect.Error {
	ce := connect.NewError(code, errors.New(msg))
	if d, err := connect.NewErrorDetail(info); err == nil {
		ce.AddDetail(d)
	}
	return ce
}

func invalidArgument(format string, args ...any) *connect.Error {
	return newError(connect.CodeInvalidArgument, &fakv1.ErrorInfo{Reason: ReasonInvalid}, fmt.Sprintf(format, args...))
}

// toConnectError maps a domain or cluster error to a Connect error.
func toConnectError(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	var fe *fsm.Error
	if errors.As(err, &fe) {
		code, ok := reasonCodes[fe.Reason]
		if !ok {
			code = connect.CodeFailedPrecondition
		}
		return newError(code, &fakv1.ErrorInfo{Reason: string(fe.Reason), HeadSeq: fe.HeadSeq}, fe.Message)
	}
	switch {
	case errors.Is(err, cluster.ErrNotLeader):
		return newError(connect.CodeUnavailable, &fakv1.ErrorInfo{Reason: ReasonNotLeader}, err.Error())
	case errors.Is(err, cluster.ErrIndeterminate):
		return newError(connect.CodeUnavailable, &fakv1.ErrorInfo{Reason: ReasonIndeterminate}, err.Error())
	case errors.Is(err, cluster.ErrShutdown):
		return newError(connect.CodeUnavailable, &fakv1.ErrorInfo{Reason: ReasonShuttingDown}, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	}
	return connect.NewError(connect.CodeInternal, err)
}

// retryableRemote extends retryable to a call on the leader that broke
// mid-flight: connect-go reports a reset or broken connection as canceled
// (or unknown/internal for a truncated response) even though our own
// context is alive. The outcome is unknown, and the request id makes the
// retry safe. Errors the leader itself produced carry an ErrorInfo detail
// and are not retried here.
func retryableRemote(ctx context.Context, err error) bool {
	if retryable(err) {
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	var ce *connect.Error
	if !errors.As(err, &ce) || len(ce.Details()) > 0 {
		return false
	}
	switch ce.Code() {
	case connect.CodeCanceled, connect.CodeUnknown, connect.CodeInternal, connect.CodeDeadlineExceeded:
		return true
	}
	return false
}

// retryable reports whether a write or read-index attempt may be retried on
// the (possibly new) leader. Writes carry request ids, so even an
// indeterminate outcome is safe to retry.
func retryable(err error) bool {
	if errors.Is(err, cluster.ErrNotLeader) || errors.Is(err, cluster.ErrIndeterminate) {
		return true
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code() == connect.CodeUnavailable
	}
	return false
}
