package node_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/node/testcluster"
)

// A metering answer is the leader's: RecordUsage sent through a follower
// reports the state its own charge produced, not the follower's replica
// from before it applied the charge. Every charge is checked against the
// running total, so one stale answer fails the test.
func TestCluster_RecordUsageThroughAFollowerAnswersTheChargedState(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	c.WaitForLeader(30 * time.Second)
	f := c.Followers()[0]
	ctx := c.Context(30 * time.Second)
	r, err := c.Sessions(f).CreateSession(ctx, connect.NewRequest(&fakv1.CreateSessionRequest{
		Title: "metered", Policy: &fakv1.Policy{ContextCap: 1000, Limits: &fakv1.Budget{Turns: 100}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	id := r.Msg.Session.SessionId
	lc := fakv1connect.NewLifecycleServiceClient(c.HTTPClient(), c.BaseURL(f), connect.WithInterceptors(apiclient.Bearer(testcluster.Token)))
	for i := uint64(1); i <= 10; i++ {
		resp, err := lc.RecordUsage(ctx, connect.NewRequest(&fakv1.RecordUsageRequest{
			SessionId: id, ContextTokens: 100, Usage: &fakv1.Budget{Turns: 1},
		}))
		if err != nil {
			t.Fatal(err)
		}
		m := resp.Msg
		if m.SessionId != id || m.ContextUsed != 100*i || m.ContextCap != 1000 || m.Envelope.GetUsed().GetTurns() != i {
			t.Fatalf("charge %d through %s answered session %q, context %d of %d, turns %d; want %s, %d of 1000, %d",
				i, f.Name, m.SessionId, m.ContextUsed, m.ContextCap, m.Envelope.GetUsed().GetTurns(), id, 100*i, i)
		}
	}
}
