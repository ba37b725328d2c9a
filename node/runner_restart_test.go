package node_test

import (
	"strings"
	"testing"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// The compute node dies mid-turn (its turn waits for an approval, so it is
// certainly in flight) with another input queued. Restarted, its runner
// closes the orphaned turn as interrupted and runs the queued input.
func TestCluster_RunnerRestartClosesTheInterruptedTurn(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{EchoTurn: 50 * time.Millisecond})
	compute := c.Followers()[0]
	id := createSession(t, c, compute, "restart")
	term := attach(t, c, c.Leader(), id, "terminal", "term")
	if err := takeLease(ctxT(t, 15*time.Second), c, c.Leader(), id, term, false); err != nil {
		t.Fatal(err)
	}
	tool := mustAct(t, c, c.Leader(), id, term, "!tool make")
	waitJournal(t, c, c.Leader(), id, "the turn to wait for approval", func(evs []*fakv1.Event) bool {
		return count(after(evs, tool), "approval.requested") == 1
	})
	next := mustAct(t, c, c.Leader(), id, term, "after the crash")

	c.Stop(compute)
	head := describe(t, c, c.Leader(), id).HeadSeq
	if s := describe(t, c, c.Leader(), id); s.Pending.GetTurnInputSeq() != tool {
		t.Fatalf("pending %v, want the tool turn (input %d) in flight", s.Pending, tool)
	}
	c.Start(compute)

	evs := waitJournal(t, c, c.Leader(), id, "the queued input's turn", turnDone(t, next))
	rest := after(evs, head)
	if rest[0].Kind != "turn.completed" || rest[0].Text != "interrupted" || fact(t, rest[0])["status"] != "interrupted" || fact(t, rest[0])["input_seq"] != float64(tool) {
		t.Fatalf("first event after the restart: %s %q %s, want turn.completed interrupted for input %d", rest[0].Kind, rest[0].Text, rest[0].Data, tool)
	}
	want := strings.Join([]string{
		"turn.started:echo on " + compute.Name, "output:echo: after the crash", "turn.completed:turn 2 done",
	}, "\n")
	if got := transcript(turnOf(t, evs, next)); got != want {
		t.Fatalf("turn after the restart:\n%s\nwant:\n%s", got, want)
	}
	if n := count(rest, "turn.completed"); n != 2 {
		t.Fatalf("%d turns completed after the restart, want 2:\n%s", n, transcript(rest))
	}
}
