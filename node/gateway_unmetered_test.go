package node_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fak-dev/fak/api/gateway"
	"github.com/fak-dev/fak/api/gateway/gatewaytest"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// Issue 32 §2: a metered call whose charge cannot be committed when it
// ends — here the leader refuses the follower's own credential, its
// tokens file rotated on it alone while the call ran — is held, counted
// in /metrics, and journaled as unmetered (budget.charged with the
// reason) at the next chance: once the rotation reaches the leader. It is
// never silently dropped.
func TestGateway_AnUnchargeableCallIsJournaledAsUnmetered(t *testing.T) {
	tokens := newTokenFiles(t)
	up := gatewaytest.New()
	t.Cleanup(up.Close)
	c := testcluster.New(t, testcluster.Options{Configure: tokens.meteredNode(up)})
	l := c.WaitForLeader(30 * time.Second)
	// The unmetered fact is fsm.BudgetStartRules'.
	waitForBudgetStartRules(t, c)
	f := c.Followers()[0]
	id := createSession(t, c, l, "unmetered")
	// The new operator token first on f alone: f now calls the leader
	// with it, which the leader does not know yet.
	rotated := "operator rotated-" + f.Name + "\noperator " + testcluster.Token + "\n"
	var once sync.Once
	up.BeforeAnswer(func() {
		once.Do(func() {
			tokens.write(f.Name, rotated)
			if _, err := f.Running().Reload(); err != nil {
				t.Errorf("reload %s: %v", f.Name, err)
			}
		})
	})
	if code, body := gatewayCalls[1].do(t, c.HTTPClient(), c.BaseURL(f)+gateway.Prefix, 1, map[string]string{gateway.HeaderTraceID: id}); code != 200 {
		t.Fatalf("the call: %d %s", code, body)
	}
	reported := up.Totals()
	metric := func(name string, labels map[string]string) float64 {
		_, mfs := scrape(t, c, f, testcluster.Token)
		v, _ := value(mfs, name, labels)
		return v
	}
	// Its charge was refused when it ended: counted, held, not charged.
	if v := metric("fak_gateway_unmetered_charges_total", map[string]string{"reason": "UNAUTHENTICATED"}); v != 1 {
		t.Fatalf("fak_gateway_unmetered_charges_total{reason=UNAUTHENTICATED} = %v, want 1", v)
	}
	if q := envelopeOf(t, c, f, id).GetUsed().GetQueries(); q != 0 {
		t.Fatalf("%d queries charged with a refused credential", q)
	}
	// The rotation reaches every node: the next try journals it.
	for _, n := range c.Nodes {
		tokens.write(n.Name, rotated)
		if _, err := n.Running().Reload(); err != nil {
			t.Fatalf("reload %s: %v", n.Name, err)
		}
	}
	var charged *fakv1.Event
	c.WaitFor(30*time.Second, "the unmetered charge journaled", func() bool {
		for _, ev := range readAll(t, c, f, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE) {
			if ev.Kind == "budget.charged" && strings.Contains(string(ev.Data), `"unmetered":"UNAUTHENTICATED"`) {
				charged = ev
			}
		}
		return charged != nil
	})
	u := envelopeOf(t, c, f, id).GetUsed()
	if u.GetQueries() != 1 || u.GetOutputTokens() != reported.OutputTokens {
		t.Fatalf("journaled %d queries, %d output tokens; the upstream reported 1 call, %d output tokens (%s)",
			u.GetQueries(), u.GetOutputTokens(), reported.OutputTokens, charged.Data)
	}
	c.WaitFor(10*time.Second, "the queue empty in /metrics", func() bool {
		return metric("fak_gateway_unmetered_journaled_total", nil) == 1 && metric("fak_gateway_unmetered_pending", nil) == 0
	})
}
