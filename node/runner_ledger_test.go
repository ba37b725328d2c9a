package node_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// attachTerminal attaches a terminal to a session through node n and
// takes the input lease for it.
func attachTerminal(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id string) string {
	t.Helper()
	term := attach(t, c, n, id, "terminal", "term")
	if err := takeLease(ctxT(t, 15*time.Second), c, n, id, term, false); err != nil {
		t.Fatal(err)
	}
	return term
}

// completedFact decodes the turn.completed of input's turn.
func completedFact(t *testing.T, evs []*fakv1.Event, input uint64) (*fakv1.Event, map[string]any) {
	t.Helper()
	turn := turnOf(t, evs, input)
	if turn == nil {
		t.Fatalf("no complete turn for input %d", input)
	}
	done := turn[len(turn)-1]
	return done, fact(t, done)
}

// The runner on a real fleet, through followers, with the reset ledger and
// a budget envelope: after a reset the agent's context holds only the
// inputs after the boundary while the whole history stays readable; a
// session allowed two turns runs two and has the third refused, and its
// clear's child, sharing the envelope, is refused too.
func TestCluster_RunnerResetAndTurnBudget(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{EchoTurn: 20 * time.Millisecond})
	fs := c.Followers()
	compute, via := fs[0], fs[1]

	t.Run("reset", func(t *testing.T) {
		id := createSession(t, c, compute, "reset")
		term := attachTerminal(t, c, via, id)
		a := mustAct(t, c, via, id, term, "a")
		waitJournal(t, c, via, id, "turn a", turnDone(t, a))
		b := mustAct(t, c, via, id, term, "b")
		waitJournal(t, c, via, id, "turn b", turnDone(t, b))
		resp, err := c.Sessions(c.Leader()).ResetSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.ResetSessionRequest{SessionId: id}))
		if err != nil {
			t.Fatalf("reset: %v", err)
		}
		boundary := resp.Msg.GetBoundary().GetSession().GetResetSeq()
		cc := mustAct(t, c, via, id, term, "c")
		evs := waitJournal(t, c, via, id, "turn c", turnDone(t, cc))

		for _, want := range []struct {
			input  uint64
			inputs float64
		}{{a, 1}, {b, 2}, {cc, 1}} {
			if _, f := completedFact(t, evs, want.input); f["status"] != "completed" || f["context_inputs"] != want.inputs {
				t.Errorf("turn of input %d: %v, want completed with context_inputs %v", want.input, f, want.inputs)
			}
		}
		if got, want := transcript(turnOf(t, evs, cc)), "turn.started:echo on "+compute.Name+"\noutput:echo: c\nturn.completed:turn 1 done"; got != want {
			t.Errorf("turn after the reset:\n%s\nwant:\n%s", got, want)
		}
		// The whole history, read linearizably through the leader.
		full := readAll(t, c, c.Leader(), id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)
		if boundary == 0 || boundary >= cc || full[boundary-1].Kind != "reset_boundary" {
			t.Fatalf("reset boundary at %d (input c at %d): %v", boundary, cc, full[boundary-1])
		}
		if got := transcript(turnOf(t, full, a)); got != "turn.started:echo on "+compute.Name+"\noutput:echo: a\nturn.completed:turn 1 done" {
			t.Fatalf("turn a before the reset, read back:\n%s", got)
		}
	})

	t.Run("turn budget", func(t *testing.T) {
		created, err := c.Sessions(compute).CreateSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.CreateSessionRequest{
			Title: "budget", Policy: &fakv1.Policy{Limits: &fakv1.Budget{Turns: 2}},
		}))
		if err != nil {
			t.Fatal(err)
		}
		id := created.Msg.Session.SessionId
		term := attachTerminal(t, c, via, id)
		var evs []*fakv1.Event
		var inputs []uint64
		for _, text := range []string{"one", "two", "three"} {
			in := mustAct(t, c, via, id, term, text)
			inputs = append(inputs, in)
			evs = waitJournal(t, c, via, id, "turn "+text, turnDone(t, in))
		}
		for i, in := range inputs[:2] {
			if _, f := completedFact(t, evs, in); f["status"] != "completed" {
				t.Errorf("turn %d: %v, want completed", i+1, f)
			}
		}
		refused := func(evs []*fakv1.Event, in uint64) {
			t.Helper()
			if got, want := transcript(turnOf(t, evs, in)), "turn.started:echo on "+compute.Name+"\nturn.completed:refused: turn budget exhausted"; got != want {
				t.Fatalf("turn of input %d:\n%s\nwant:\n%s", in, got, want)
			}
			if _, f := completedFact(t, evs, in); f["status"] != "refused" || f["reason"] != "BUDGET_EXHAUSTED" {
				t.Fatalf("refused turn data %v", f)
			}
			if count(after(evs, in), "budget.exhausted") != 1 {
				t.Fatalf("want one budget.exhausted after input %d:\n%s", in, transcript(after(evs, in)))
			}
		}
		refused(evs, inputs[2])

		// A clear does not launder the quota: the child shares the envelope.
		cleared, err := c.Sessions(via).ClearSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.ClearSessionRequest{SessionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		child := cleared.Msg.GetBoundary().GetSession().GetSessionId()
		term = attachTerminal(t, c, c.Leader(), child)
		in := mustAct(t, c, c.Leader(), child, term, "four")
		refused(waitJournal(t, c, via, child, "the child's turn", turnDone(t, in)), in)

		d, err := c.Sessions(compute).DescribeSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: child}))
		if err != nil {
			t.Fatal(err)
		}
		if u := d.Msg.GetBudget(); u.GetUsed().GetTurns() != 2 || u.GetUsed().GetQueries() != 2 || u.GetRefusals() != 2 || u.GetSessions() != 2 {
			t.Fatalf("child's envelope %v: want 2 turns and 2 queries used, 2 refusals, shared by 2 sessions", u)
		}
	})
}
