package runner_test

import (
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// A new session's head after create, attach and take lease.
const setupHead = 4

func turnsDone(n uint64) func(*fsmpb.Session) bool {
	return func(s *fsmpb.Session) bool { return s.TurnsCompleted == n && s.TurnInputSeq == 0 }
}

func TestRunner_QueuedInputsRunInOrder(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n1", "echo")
	first := l.input(id, "hello")
	second := l.input(id, "two words")
	l.startRunner(0, nil)
	l.waitSession(id, "two turns", turnsDone(2))

	evs := l.journal(id)
	want := strings.Join([]string{
		"turn.started:echo on n1", "output:echo: hello", "turn.completed:turn 1 done",
		"turn.started:echo on n1", "output:echo: two words", "turn.completed:turn 2 done",
	}, "\n")
	if got := transcript(evs, second); got != want {
		t.Fatalf("transcript:\n%s\nwant:\n%s", got, want)
	}
	var inputs []uint64
	for _, ev := range evs {
		if ev.Kind == fsm.KindTurnStarted {
			var d struct {
				InputSeq uint64 `json:"input_seq"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			inputs = append(inputs, d.InputSeq)
		}
	}
	if !slices.Equal(inputs, []uint64{first, second}) {
		t.Fatalf("turns served inputs %v, want %v", inputs, []uint64{first, second})
	}
}

func TestRunner_InputDuringATurnQueuesAndRunsNext(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n1", "echo")
	l.startRunner(200*time.Millisecond, nil)
	l.input(id, "a")
	l.waitSession(id, "the first turn to start", func(s *fsmpb.Session) bool { return s.TurnInputSeq != 0 })
	second := l.input(id, "b")
	l.waitSession(id, "two turns", turnsDone(2))
	got := transcript(l.journal(id), setupHead)
	want := strings.Join([]string{
		"input:a", "turn.started:echo on n1", "output:echo: a",
		"turn.completed:turn 1 done", // the second input was queued meanwhile
		"turn.started:echo on n1", "output:echo: b", "turn.completed:turn 2 done",
	}, "\n")
	// Where the second input lands among the first turn's events depends
	// on timing; everything else must be in this order.
	got = strings.Replace(got, "input:b\n", "", 1)
	if got != want {
		t.Fatalf("transcript (input %d removed):\n%s\nwant:\n%s", second, got, want)
	}
}

func TestRunner_ToolWaitsForApproval(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n1", "echo")
	l.startRunner(0, nil)
	in := l.input(id, "!tool ls -la")
	s := l.waitSession(id, "an approval request", func(s *fsmpb.Session) bool { return s.PendingApprovalSeq != 0 })
	evs := l.journal(id)
	call, req := evs[len(evs)-2], evs[len(evs)-1]
	if call.Kind != fsm.KindToolCall || string(call.Data) != `{"tool":"ls","args":"-la"}` {
		t.Fatalf("tool call = %s %q %s", call.Kind, call.Text, call.Data)
	}
	if req.Kind != fsm.KindApprovalRequested || req.Text != "run ls -la?" || req.Seq != s.PendingApprovalSeq {
		t.Fatalf("approval request = %d %s %q (pending %d)", req.Seq, req.Kind, req.Text, s.PendingApprovalSeq)
	}
	l.answer(id, req.Seq, true)
	l.waitSession(id, "the tool turn", turnsDone(1))
	if again := l.answer(id, req.Seq, false); !again.NoOp {
		t.Fatal("answering twice changed something")
	}
	want := strings.Join([]string{
		"turn.started:echo on n1", "tool.call:ls -la", "approval.requested:run ls -la?",
		"approval.answered:approved by terminal ", "tool.result:ls -la: approved, ran (echo)",
		"output:echo: ran ls -la", "turn.completed:turn 1 done",
	}, "\n")
	if got := transcript(l.journal(id), in); got != want {
		t.Fatalf("transcript:\n%s\nwant:\n%s", got, want)
	}

	in = l.input(id, "!tool rm -rf /")
	s = l.waitSession(id, "a second approval request", func(s *fsmpb.Session) bool { return s.PendingApprovalSeq != 0 })
	l.answer(id, s.PendingApprovalSeq, false)
	l.waitSession(id, "the denied turn", turnsDone(2))
	if got := transcript(l.journal(id), in); !strings.Contains(got, "tool.result:rm -rf /: denied\noutput:echo: did not run rm -rf /\nturn.completed") {
		t.Fatalf("denied transcript:\n%s", got)
	}
}

// A turn left open by a runner that died is closed as interrupted, and the
// queue continues; the echo runtime, rebuilt from the journal, counts the
// interrupted turn too.
func TestRunner_ClosesAnOrphanedTurnAndContinues(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n1", "echo")
	l.input(id, "first")
	l.must(&fsmpb.Command{RequestId: "dead-runner", Body: &fsmpb.Command_RunnerAppend{RunnerAppend: &fsmpb.RunnerAppend{
		SessionId: id, Epoch: 1, Events: []*fsmpb.EventInput{{Kind: fsm.KindTurnStarted}, {Kind: fsm.KindOutput, Text: "echo: fi"}}}}})
	second := l.input(id, "second")
	l.startRunner(0, nil)
	l.waitSession(id, "the orphan closed and the next turn run", turnsDone(2))
	evs := l.journal(id)
	want := strings.Join([]string{
		"turn.completed:interrupted",
		"turn.started:echo on n1", "output:echo: second", "turn.completed:turn 2 done",
	}, "\n")
	if got := transcript(evs, second); got != want {
		t.Fatalf("transcript:\n%s\nwant:\n%s", got, want)
	}
	for _, ev := range evs {
		if ev.Seq > second {
			if ev.Kind == fsm.KindTurnCompleted && ev.Text == "interrupted" && string(ev.Data) != `{"status":"interrupted","input_seq":5}` {
				t.Fatalf("interrupted data = %s", ev.Data)
			}
			break
		}
	}
}

// Sessions of other nodes, and sessions naming an adapter this node does
// not have, get no writes; the unknown adapter is reported once.
func TestRunner_SkipsOtherNodesAndUnknownAdapters(t *testing.T) {
	l := newLocal(t)
	nope := l.session("s-nope", "n1", "nope")
	other := l.session("s-other", "n2", "echo")
	mine := l.session("s-mine", "n1", "echo")
	l.input(nope, "x")
	l.input(other, "x")
	logs := &syncBuffer{}
	l.startRunner(0, logs)
	// Every scan visits every session, so once two turns of s-mine (each
	// after its own change notification) are done, the others have been
	// looked at several times.
	for i := uint64(1); i <= 3; i++ {
		l.input(mine, "x")
		l.waitSession(mine, "a turn of s-mine", turnsDone(i))
	}
	for _, id := range []string{nope, other} {
		if s, _ := l.f.Session(id); s.HeadSeq != setupHead+1 || s.TurnInputSeq != 0 {
			t.Errorf("%s: head %d (turn %d), want %d and untouched", id, s.HeadSeq, s.TurnInputSeq, setupHead+1)
		}
	}
	if n := strings.Count(logs.String(), "unknown runtime adapter"); n != 1 {
		t.Fatalf("unknown adapter reported %d times, want once:\n%s", n, logs.String())
	}
}

// A write whose outcome was lost is retried under the same request id and
// the FSM applies it once.
func TestRunner_RetriedWritesAreNotDuplicated(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n1", "echo")
	l.indeterminate = 2
	in := l.input(id, "hello")
	l.startRunner(0, nil)
	l.waitSession(id, "the turn", turnsDone(1))
	want := "turn.started:echo on n1\noutput:echo: hello\nturn.completed:turn 1 done"
	if got := transcript(l.journal(id), in); got != want {
		t.Fatalf("transcript:\n%s\nwant:\n%s", got, want)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// The first write failed twice: three attempts under one id, then one
	// attempt per later write.
	ids := l.requestIDs
	if len(ids) < 4 || ids[0] != ids[1] || ids[1] != ids[2] || len(slices.Compact(slices.Clone(ids))) != len(ids)-2 {
		t.Fatalf("request ids %v: want the failed write retried under its id, every other write once", ids)
	}
}

// Stopping a session while its turn waits for an approval ends the turn
// quietly; the runner keeps serving other sessions.
func TestRunner_StoppedSessionEndsItsTurnQuietly(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n1", "echo")
	other := l.session("s2", "n1", "echo")
	l.startRunner(0, nil)
	l.input(id, "!tool ls")
	l.waitSession(id, "an approval request", func(s *fsmpb.Session) bool { return s.PendingApprovalSeq != 0 })
	l.must(&fsmpb.Command{Body: &fsmpb.Command_StopSession{StopSession: &fsmpb.StopSession{SessionId: id, Reason: "test"}}})
	stopped, _ := l.f.Session(id)
	l.input(other, "still here")
	l.waitSession(other, "a turn of the other session", turnsDone(1))
	l.input(other, "and again")
	l.waitSession(other, "a second turn of the other session", turnsDone(2))
	if s, _ := l.f.Session(id); s.HeadSeq != stopped.HeadSeq {
		t.Fatalf("the runner wrote to a stopped session: head %d after stop at %d", s.HeadSeq, stopped.HeadSeq)
	}
}

// A runner hint starts the turn from the replica one event behind: here
// the input is applied only as the runner's turn.started is (the replica
// learns the input's commit from turn.started's replication), and the
// turn serves it. (Which hints fit the replica is fsm.WithInput's test.)
func TestRunner_HintStartsTheTurnBeforeTheReplicaHasTheInput(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n1", "echo")
	r := l.startRunner(0, nil)
	before := l.waitSession(id, "the session", func(*fsmpb.Session) bool { return true })
	input := before.HeadSeq + 1

	var behind atomic.Bool
	l.beforeTurnStart = func() {
		s, _ := l.f.Session(id)
		behind.Store(s.HeadSeq == input-1)
		if got := l.input(id, "hinted"); got != input {
			t.Errorf("input at %d, want %d", got, input)
		}
	}
	r.Hint(id, before.Epoch, input)
	l.waitSession(id, "the hinted turn", turnsDone(1))
	if !behind.Load() {
		t.Fatal("the turn started after the replica applied the input: the hint was not acted on")
	}
	if got := completedFor(t, l.journal(id), input); got.Status != "completed" {
		t.Fatalf("turn of the hinted input: %+v", got)
	}
}
