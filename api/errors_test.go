package api

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/fsm"
)

func TestToConnectErrorMapsReasons(t *testing.T) {
	tests := []struct {
		err    error
		code   connect.Code
		reason string
	}{
		{&fsm.Error{Reason: fsm.ReasonNotFound, Message: "x"}, connect.CodeNotFound, "NOT_FOUND"},
		{&fsm.Error{Reason: fsm.ReasonInvalidArgument}, connect.CodeInvalidArgument, "INVALID_ARGUMENT"},
		{&fsm.Error{Reason: fsm.ReasonSeqMismatch, HeadSeq: 7}, connect.CodeAborted, "SEQ_MISMATCH"},
		{&fsm.Error{Reason: fsm.ReasonSessionStopped}, connect.CodeFailedPrecondition, "SESSION_STOPPED"},
		{&fsm.Error{Reason: fsm.ReasonNoTurnRunning}, connect.CodeFailedPrecondition, "NO_TURN_RUNNING"},
		{&fsm.Error{Reason: fsm.ReasonExternalRuntime}, connect.CodeFailedPrecondition, "EXTERNAL_RUNTIME"},
		{&fsm.Error{Reason: fsm.ReasonNoSuchRuntime}, connect.CodeFailedPrecondition, "NO_SUCH_RUNTIME"},
		{fmt.Errorf("wrapped: %w", cluster.ErrNotLeader), connect.CodeUnavailable, ReasonNotLeader},
		{cluster.ErrIndeterminate, connect.CodeUnavailable, ReasonIndeterminate},
		{cluster.ErrShutdown, connect.CodeUnavailable, ReasonShuttingDown},
		{context.DeadlineExceeded, connect.CodeDeadlineExceeded, ""},
		{errors.New("boom"), connect.CodeInternal, ""},
	}
	for _, tt := range tests {
		err := toConnectError(tt.err)
		if connect.CodeOf(err) != tt.code {
			t.Errorf("%v: code %v, want %v", tt.err, connect.CodeOf(err), tt.code)
		}
		var reason string
		var head uint64
		var ce *connect.Error
		if errors.As(err, &ce) {
			for _, d := range ce.Details() {
				if v, derr := d.Value(); derr == nil {
					reason = v.(*fakv1.ErrorInfo).Reason
					head = v.(*fakv1.ErrorInfo).HeadSeq
				}
			}
		}
		if reason != tt.reason {
			t.Errorf("%v: reason %q, want %q", tt.err, reason, tt.reason)
		}
		if tt.reason == "SEQ_MISMATCH" && head != 7 {
			t.Errorf("SEQ_MISMATCH detail head_seq = %d, want 7", head)
		}
	}
}

func TestRetryableRemote(t *testing.T) {
	alive := context.Background()
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	broken := connect.NewError(connect.CodeCanceled, errors.New("connection reset by peer"))
	domain := toConnectError(&fsm.Error{Reason: fsm.ReasonNotFound})
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"leader died mid-call", alive, broken, true},
		{"caller gave up", dead, broken, false},
		{"not leader", alive, toConnectError(cluster.ErrNotLeader), true},
		{"domain error from the leader", alive, domain, false},
		{"invalid argument", alive, invalidArgument("bad"), false},
	}
	for _, tt := range tests {
		if got := retryableRemote(tt.ctx, tt.err); got != tt.want {
			t.Errorf("%s: retryableRemote = %v, want %v", tt.name, got, tt.want)
		}
	}
}
