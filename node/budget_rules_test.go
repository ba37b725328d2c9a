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

// fsm.BudgetStartRules in a rolling upgrade: with every voter's build at
// the rule version, the leader stamps charges with it and a call's start
// on an envelope used exactly up (output tokens 7 of 7) is refused; while
// a voter runs an older build (here one with no node record), the leader
// stamps the rules before, which every replica applies alike, and the
// start passes as it did.
func TestBudgetStartRules_WaitForEveryVoter(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	leader := c.WaitForLeader(30 * time.Second)
	c.WaitFor(30*time.Second, "three node records", func() bool {
		recs, err := leader.Running().FSM().Nodes()
		return err == nil && len(recs) == 3
	})
	r, err := c.Sessions(leader).CreateSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.CreateSessionRequest{
		Title: "exact", Policy: &fakv1.Policy{Limits: &fakv1.Budget{OutputTokens: 7}}}))
	if err != nil {
		t.Fatal(err)
	}
	id := r.Msg.Session.SessionId
	lc := fakv1connect.NewLifecycleServiceClient(c.HTTPClient(), c.BaseURL(leader), connect.WithInterceptors(apiclient.Bearer(testcluster.Token)))
	charge := func(usage *fakv1.Budget, incurred bool) error {
		_, err := lc.RecordUsage(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.RecordUsageRequest{SessionId: id, Usage: usage, Incurred: incurred}))
		return err
	}
	if err := charge(&fakv1.Budget{Queries: 1, OutputTokens: 7}, true); err != nil {
		t.Fatal(err)
	}
	if err := charge(&fakv1.Budget{Queries: 1}, false); reasonOf(err) != "BUDGET_EXHAUSTED" {
		t.Fatalf("a call's start at 7 of 7 output tokens: %v, want BUDGET_EXHAUSTED", err)
	}
	if err := leader.Running().Cluster().Raft().AddVoter("old-build", "127.0.0.1:1", 0, 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if err := charge(&fakv1.Budget{Queries: 1}, false); err != nil {
		t.Fatalf("with a voter of an older build, the rules before: %v, want the start charged", err)
	}
}
