package node_test

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// turnOf returns the runner's events for the input at seq: from its
// turn.started to the matching turn.completed (nil while incomplete).
func turnOf(t *testing.T, evs []*fakv1.Event, input uint64) []*fakv1.Event {
	t.Helper()
	for i, ev := range evs {
		if ev.Kind != "turn.started" || fact(t, ev)["input_seq"] != float64(input) {
			continue
		}
		var out []*fakv1.Event
		for _, e := range evs[i:] {
			switch e.Kind {
			case "input", "approval.answered", "lease.taken", "lease.released", "attachment.joined", "attachment.left":
				continue // written by others meanwhile
			}
			out = append(out, e)
			if e.Kind == "turn.completed" {
				return out
			}
		}
		return nil
	}
	return nil
}

func turnDone(t *testing.T, input uint64) func([]*fakv1.Event) bool {
	return func(evs []*fakv1.Event) bool { return turnOf(t, evs, input) != nil }
}

// The runner of the node a session is placed on turns committed input
// into turns, whichever node the input came through; inputs queue and run
// in order; a tool waits for an approval that any attachment may give.
func TestCluster_RunnerEndToEnd(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{EchoTurn: 100 * time.Millisecond})
	fs := c.Followers()
	compute, via := fs[0], fs[1]
	id := createSession(t, c, compute, "runner")
	if s := describe(t, c, via, id); s.Placement.GetNode() != compute.Name || s.Placement.GetRuntimeAdapter() != "echo" {
		t.Fatalf("placement = %v, want echo on %s", s.Placement, compute.Name)
	}
	term := attach(t, c, via, id, "terminal", "term")
	if err := takeLease(ctxT(t, 15*time.Second), c, via, id, term, false); err != nil {
		t.Fatal(err)
	}

	hello := mustAct(t, c, via, id, term, "hello")
	evs := waitJournal(t, c, c.Leader(), id, "the turn for hello", turnDone(t, hello))
	turn := turnOf(t, evs, hello)
	if got, want := transcript(turn), "turn.started:echo on "+compute.Name+"\noutput:echo: hello\nturn.completed:turn 1 done"; got != want {
		t.Fatalf("turn:\n%s\nwant:\n%s", got, want)
	}
	if f := fact(t, turn[0]); f["node"] != compute.Name || count(turn, "output") < 2 {
		t.Fatalf("turn.started %s with %d outputs: want node %s and a streamed reply", turn[0].Data, count(turn, "output"), compute.Name)
	}

	// Two inputs in quick succession: the second queues behind the first.
	one := mustAct(t, c, via, id, term, "one")
	two := mustAct(t, c, c.Leader(), id, term, "two")
	evs = waitJournal(t, c, compute, id, "both turns", func(evs []*fakv1.Event) bool {
		return turnOf(t, evs, one) != nil && turnOf(t, evs, two) != nil
	})
	t1, t2 := turnOf(t, evs, one), turnOf(t, evs, two)
	if t1[len(t1)-1].Seq >= t2[0].Seq {
		t.Fatalf("turns overlap: one %d..%d, two %d..%d", t1[0].Seq, t1[len(t1)-1].Seq, t2[0].Seq, t2[len(t2)-1].Seq)
	}
	if !strings.Contains(transcript(t1), "output:echo: one\n") || !strings.Contains(transcript(t2), "output:echo: two\n") {
		t.Fatalf("replies:\n%s\n--\n%s", transcript(t1), transcript(t2))
	}

	// A tool call waits for an approval; another attachment, without the
	// lease, answers it.
	tool := mustAct(t, c, via, id, term, "!tool ls")
	evs = waitJournal(t, c, via, id, "the approval request", func(evs []*fakv1.Event) bool {
		return count(after(evs, tool), "approval.requested") == 1
	})
	var req *fakv1.Event
	for _, ev := range after(evs, tool) {
		if ev.Kind == "approval.requested" {
			req = ev
		}
	}
	if req.Text != "run ls?" {
		t.Fatalf("approval request %q", req.Text)
	}
	phone := attach(t, c, c.Leader(), id, "browser", "phone")
	answer := func() *fakv1.AnswerApprovalResponse {
		resp, err := c.Sessions(c.Leader()).AnswerApproval(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.AnswerApprovalRequest{
			SessionId: id, AttachmentId: phone, ApprovalSeq: req.Seq, Approved: true,
		}))
		if err != nil {
			t.Fatalf("answer: %v", err)
		}
		return resp.Msg
	}
	if answer().AlreadyAnswered {
		t.Fatal("first answer reported already answered")
	}
	evs = waitJournal(t, c, c.Leader(), id, "the tool turn", turnDone(t, tool))
	want := strings.Join([]string{
		"turn.started:echo on " + compute.Name, "tool.call:ls", "approval.requested:run ls?",
		"tool.result:ls: approved, ran (echo)", "output:echo: ran ls", "turn.completed:turn 4 done",
	}, "\n")
	if got := transcript(turnOf(t, evs, tool)); got != want {
		t.Fatalf("tool turn:\n%s\nwant:\n%s", got, want)
	}
	if !answer().AlreadyAnswered {
		t.Fatal("second answer was not a no-op")
	}
}
