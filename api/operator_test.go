package api

import (
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/cluster/snapshotfile"
)

func TestOperatorErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   connect.Code
		reason string
	}{
		{&snapshotfile.FormatError{Reason: "checksum mismatch"}, connect.CodeInvalidArgument, ReasonInvalidSnapshot},
		{fmt.Errorf("server %q: %w", "n9", cluster.ErrPeerNotFound), connect.CodeNotFound, ReasonNotFound},
		{fmt.Errorf("server %q is the leader: %w", "n1", cluster.ErrRemoveLeader), connect.CodeFailedPrecondition, ReasonPeerIsLeader},
		{fmt.Errorf("server %q: %w", "n2", cluster.ErrPeerAlive), connect.CodeFailedPrecondition, ReasonPeerAlive},
		{cluster.ErrNotLeader, connect.CodeUnavailable, ReasonNotLeader},
	} {
		err := operatorError(tc.err)
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != tc.code {
			t.Errorf("%v: %v; want code %v", tc.err, err, tc.code)
			continue
		}
		if got := reasonOfError(ce); got != tc.reason {
			t.Errorf("%v: reason %q; want %q", tc.err, got, tc.reason)
		}
	}
}

// A stream that broke after bytes went through must not be retried by
// leaderCall; one that never started may be.
func TestStreamStartedIsNotRetried(t *testing.T) {
	unavailable := connect.NewError(connect.CodeUnavailable, errors.New("connection reset"))
	if !retryable(unavailable) {
		t.Fatal("precondition: Unavailable is retryable")
	}
	if err := streamStarted(unavailable); retryable(err) || connect.CodeOf(err) != connect.CodeAborted {
		t.Fatalf("streamStarted(Unavailable) = %v; want a non-retryable Aborted", err)
	}
	if err := streamStarted(cluster.ErrNotLeader); retryable(err) {
		t.Fatalf("streamStarted(ErrNotLeader) = %v is retryable", err)
	}
	invalid := newError(connect.CodeInvalidArgument, &fakv1.ErrorInfo{Reason: ReasonInvalidSnapshot}, "bad")
	if err := streamStarted(invalid); err != invalid {
		t.Fatalf("streamStarted kept %v as %v; a final answer passes through", invalid, err)
	}
	if streamStarted(nil) != nil {
		t.Fatal("streamStarted(nil) != nil")
	}
}

func reasonOfError(ce *connect.Error) string {
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if info, ok := v.(*fakv1.ErrorInfo); ok {
				return info.GetReason()
			}
		}
	}
	return ""
}
