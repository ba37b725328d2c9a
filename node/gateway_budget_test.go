package node_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/gateway"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/node/testcluster"
)

// cappedSession creates, through n, a session whose envelope allows
// outputTokens output tokens.
func cappedSession(t testing.TB, c *testcluster.Cluster, n *testcluster.Node, title string, outputTokens uint64) string {
	t.Helper()
	r, err := c.Sessions(n).CreateSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.CreateSessionRequest{
		Title: title, Policy: &fakv1.Policy{Limits: &fakv1.Budget{OutputTokens: outputTokens}}}))
	if err != nil {
		t.Fatal(err)
	}
	return r.Msg.Session.SessionId
}

// waitForBudgetStartRules waits until the leader stamps charges with
// fsm.BudgetStartRules: every voter's record says its build applies it.
func waitForBudgetStartRules(t testing.TB, c *testcluster.Cluster) {
	t.Helper()
	c.WaitFor(30*time.Second, "every node record at BudgetStartRules", func() bool {
		l := c.Leader()
		if l == nil {
			return false
		}
		resp, err := c.NodeClient(l).ListNodes(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.ListNodesRequest{}))
		if err != nil || len(resp.Msg.Nodes) != 3 {
			return false
		}
		for _, n := range resp.Msg.Nodes {
			if n.RuleVersion < fsm.BudgetStartRules {
				return false
			}
		}
		return true
	})
}

// Issue 32 §2: calls sent back to back (each after the previous answer
// ended) through the leader, through each follower, and round the three
// nodes, never start past the limit: once the committed usage reaches
// the limit, the next call is refused without reaching the upstream.
// The first case is the exact limit (used 7 of 7 on the output axis,
// which the admission's query charge does not touch).
func TestGateway_BackToBackCallsNeverStartPastTheLimit(t *testing.T) {
	c, up := gatewayFleet(t)
	client := c.HTTPClient()
	waitForBudgetStartRules(t, c)
	nodes := []*testcluster.Node{c.Leader(), c.Followers()[0], c.Followers()[1]}
	call := func(k int) gatewayCall { return gatewayCalls[k%2] } // Anthropic, streamed and not
	// Each call's usage is a function of its body: learn call k's output
	// tokens on an uncapped session.
	probe := createSession(t, c, c.Leader(), "probe")
	outputs := map[int]uint64{}
	outputOf := func(k int) uint64 {
		if o, ok := outputs[k]; ok {
			return o
		}
		before := up.Totals().OutputTokens
		if code, body := call(k).do(t, client, c.BaseURL(c.Leader())+gateway.Prefix, k, map[string]string{gateway.HeaderTraceID: probe}); code != 200 {
			t.Fatalf("probe call %d: %d %s", k, code, body)
		}
		outputs[k] = up.Totals().OutputTokens - before
		return outputs[k]
	}
	type run struct {
		name  string
		via   func(i int) *testcluster.Node
		limit func(first int) uint64
	}
	var runs []run
	for _, n := range nodes {
		role := "follower"
		if n == c.Leader() {
			role = "leader"
		}
		runs = append(runs,
			run{"exact via " + role + " " + n.Name, func(int) *testcluster.Node { return n }, outputOf},
			run{"back to back via " + role + " " + n.Name, func(int) *testcluster.Node { return n }, func(int) uint64 { return 1000 }})
	}
	runs = append(runs, run{"round the nodes", func(i int) *testcluster.Node { return nodes[i%3] }, func(int) uint64 { return 1200 }})
	for r, rn := range runs {
		first := 1000 * (r + 1)
		for k := first; k < first+12; k++ {
			outputOf(k)
		}
		limit := rn.limit(first)
		id := cappedSession(t, c, rn.via(0), fmt.Sprintf("capped-%d", r), limit)
		hdr := map[string]string{gateway.HeaderTraceID: id}
		var used uint64
		passed, refused := 0, 0
		for i := 0; i < 12 && refused < 2; i++ {
			k, n := first+i, rn.via(i)
			before := up.Requests()
			code, body := call(k).do(t, client, c.BaseURL(n)+gateway.Prefix, k, hdr)
			reached := up.Requests() - before
			switch {
			case used < limit && code == 200:
				used += outputOf(k)
				passed++
			case used < limit:
				t.Fatalf("%s: call %d via %s with %d of %d output tokens used: %d %s", rn.name, i, n.Name, used, limit, code, body)
			case code != http.StatusTooManyRequests || reached != 0:
				t.Fatalf("%s: call %d via %s started past the limit (%d of %d output tokens used): %d, %d upstream requests: %s",
					rn.name, i, n.Name, used, limit, code, reached, body)
			default:
				refused++
			}
		}
		if passed == 0 || refused == 0 {
			t.Fatalf("%s: %d calls passed, %d refused: the run did not reach its limit", rn.name, passed, refused)
		}
		if got := envelopeOf(t, c, c.Leader(), id).GetUsed().GetOutputTokens(); got != used {
			t.Fatalf("%s: the envelope holds %d output tokens, the passed calls used %d", rn.name, got, used)
		}
	}
}
