package node_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// Act refuses input with a typed error and appends nothing: without the
// lease (held by another attachment, or by nobody), against a stale epoch,
// to a stopped session.
func TestCluster_ActTypedErrorsAppendNothing(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{EchoTurn: 50 * time.Millisecond})
	f := c.Followers()[0]
	id := createSession(t, c, f, "typed errors")
	holder := attach(t, c, f, id, "terminal", "holder")
	other := attach(t, c, c.Leader(), id, "browser", "other")

	refused := func(name string, call func(ctx context.Context) error, code connect.Code, reason string) {
		t.Helper()
		before := describe(t, c, c.Leader(), id).HeadSeq
		err := call(ctxT(t, 15*time.Second))
		if connect.CodeOf(err) != code || reasonOf(err) != reason {
			t.Fatalf("%s: %v (code %v, reason %q), want %v %s", name, err, connect.CodeOf(err), reasonOf(err), code, reason)
		}
		// Nothing was appended: read linearizably on every node.
		for _, n := range c.Nodes {
			if got := describe(t, c, n, id).HeadSeq; got != before {
				t.Fatalf("%s: head on %s moved from %d to %d", name, n.Name, before, got)
			}
		}
	}
	input := func(att string, epoch uint64) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := act(ctx, c, f, id, att, epoch, "hi")
			return err
		}
	}

	refused("nobody holds the lease", input(holder, 1), connect.CodeFailedPrecondition, "LEASE_NOT_HELD")
	if err := takeLease(ctxT(t, 15*time.Second), c, f, id, holder, false); err != nil {
		t.Fatal(err)
	}
	refused("another attachment holds the lease", input(other, 1), connect.CodeFailedPrecondition, "LEASE_NOT_HELD")
	refused("stale epoch", input(holder, 2), connect.CodeFailedPrecondition, "STALE_EPOCH")
	refused("no epoch", input(holder, 0), connect.CodeFailedPrecondition, "STALE_EPOCH")

	// The same input at the right epoch is accepted (the checks above were
	// about the input, not the session) ...
	seq := mustAct(t, c, f, id, holder, "accepted")
	waitJournal(t, c, f, id, "the accepted input's turn", func(evs []*fakv1.Event) bool {
		return count(after(evs, seq), "turn.completed") == 1
	})
	// ... and once the session is stopped, input is refused as such.
	if _, err := c.Sessions(c.Leader()).StopSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.StopSessionRequest{SessionId: id, Reason: "done"})); err != nil {
		t.Fatal(err)
	}
	refused("stopped session", input(holder, 1), connect.CodeFailedPrecondition, "SESSION_STOPPED")
}
