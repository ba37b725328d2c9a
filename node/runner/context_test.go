package runner_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/echo"
)

// spy wraps an adapter and records what each runtime it starts can see of
// the journal, and when runtimes stop.
type spy struct {
	runner.Adapter
	mu     sync.Mutex
	starts []spyStart
	stops  int
}

type spyStart struct {
	resetSeq uint64 // Epoch.ResetSeq given to Start
	firstSeq uint64 // the first event a read of the journal from seq 1 gave (0: none)
}

func (s *spy) Start(ctx context.Context, ep runner.Epoch, j runner.Journal) (runner.Runtime, error) {
	evs, err := j.Events(1, 1)
	if err != nil {
		return nil, err
	}
	st := spyStart{resetSeq: ep.ResetSeq}
	if len(evs) > 0 {
		st.firstSeq = evs[0].Seq
	}
	s.mu.Lock()
	s.starts = append(s.starts, st)
	s.mu.Unlock()
	rt, err := s.Adapter.Start(ctx, ep, j)
	if err != nil {
		return nil, err
	}
	return &spyRuntime{Runtime: rt, s: s}, nil
}

func (s *spy) snapshot() ([]spyStart, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]spyStart(nil), s.starts...), s.stops
}

type spyRuntime struct {
	runner.Runtime
	s *spy
}

func (r *spyRuntime) Stop() error {
	r.s.mu.Lock()
	r.s.stops++
	r.s.mu.Unlock()
	return r.Runtime.Stop()
}

// waitFor polls cond until it holds (deadline 10s).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// completedTurn is what turn.completed says about the turn of one input.
type completedTurn struct {
	Text          string
	Seq           uint64
	Status        string `json:"status"`
	Reason        string `json:"reason"`
	ContextInputs int    `json:"context_inputs"`
}

// completedFor returns the turn.completed event of input's turn.
func completedFor(t *testing.T, evs []*fsmpb.Event, input uint64) completedTurn {
	t.Helper()
	for _, ev := range evs {
		if ev.Kind != fsm.KindTurnCompleted {
			continue
		}
		var d struct {
			completedTurn
			InputSeq uint64 `json:"input_seq"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatalf("turn.completed %d data %q: %v", ev.Seq, ev.Data, err)
		}
		if d.InputSeq == input {
			d.completedTurn.Text, d.completedTurn.Seq = ev.Text, ev.Seq
			return d.completedTurn
		}
	}
	t.Fatalf("no turn.completed for input %d", input)
	return completedTurn{}
}

// A reset between turns: the runtime of the old context is stopped, the
// next turn runs in a new one that sees only the events after the
// boundary (context_inputs counts the inputs since the reset), and the
// whole history stays in the journal.
func TestRunner_ResetRebuildsTheContext(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n1", "echo")
	sp := &spy{Adapter: echo.New(echo.Options{})}
	l.startRunnerWith(nil, sp)

	a := l.input(id, "a")
	l.waitSession(id, "turn a", turnsDone(1))
	b := l.input(id, "b")
	l.waitSession(id, "turn b", turnsDone(2))
	boundary := l.reset(id, "p-reset")
	waitFor(t, "the old context's runtime to stop", func() bool { _, stops := sp.snapshot(); return stops == 1 })
	c := l.input(id, "c")
	l.waitSession(id, "turn c", turnsDone(3))
	d := l.input(id, "d")
	l.waitSession(id, "turn d", turnsDone(4))

	evs := l.journal(id)
	for _, want := range []struct {
		input   uint64
		summary string
		inputs  int
	}{
		{a, "turn 1 done", 1}, {b, "turn 2 done", 2},
		{c, "turn 1 done", 1}, {d, "turn 2 done", 2}, // the context starts after the boundary
	} {
		got := completedFor(t, evs, want.input)
		if got.Status != "completed" || got.Text != want.summary || got.ContextInputs != want.inputs {
			t.Errorf("turn of input %d: %q %+v, want %q with context_inputs %d", want.input, got.Text, got, want.summary, want.inputs)
		}
	}
	// The reply text is unchanged, and the history before the boundary is
	// still there.
	full := transcript(evs, 0)
	for _, want := range []string{
		"input:a\nturn.started:echo on n1\noutput:echo: a\nturn.completed:turn 1 done",
		"input:b\nturn.started:echo on n1\noutput:echo: b\nturn.completed:turn 2 done",
		"reset_boundary:context reset",
		"input:c\nturn.started:echo on n1\noutput:echo: c\nturn.completed:turn 1 done",
	} {
		if !strings.Contains(full, want) {
			t.Errorf("journal lacks\n%s\nin\n%s", want, full)
		}
	}
	starts, stops := sp.snapshot()
	if len(starts) != 2 || stops != 1 {
		t.Fatalf("runtimes started %+v, stopped %d: want one per context, the first stopped", starts, stops)
	}
	if starts[0] != (spyStart{resetSeq: 0, firstSeq: 1}) {
		t.Errorf("first runtime: %+v, want the whole journal", starts[0])
	}
	// The new runtime's journal starts after the boundary (the first
	// event may be turn b's output charge, committed after the reset).
	if starts[1].resetSeq != boundary || starts[1].firstSeq <= boundary || starts[1].firstSeq > c {
		t.Errorf("second runtime: %+v, want reset seq %d and nothing at or before it", starts[1], boundary)
	}
}

// A reset committed after the runner read the session and before its
// turn.started drops the input it read; the FSM refuses a turn.started
// for that input (StartsInput: TURN_ORDER). The runner re-reads and serves
// the input queued after the reset, in a new context.
func TestRunner_ResetBeforeTurnStartedServesTheInputAfterIt(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n1", "echo")
	var lateSeq atomic.Uint64
	var once sync.Once
	l.beforeTurnStart = func() {
		once.Do(func() {
			for _, cmd := range []*fsmpb.Command{
				{Body: &fsmpb.Command_ResetSession{ResetSession: &fsmpb.ResetSession{SessionId: id, ProviderSessionId: "p-race"}}},
				{Body: &fsmpb.Command_SubmitInput{SubmitInput: &fsmpb.SubmitInput{SessionId: id, AttachmentId: "term", ExpectedEpoch: 1, Text: "late"}}},
			} {
				res := l.apply(cmd)
				if err := fsm.ResultError(res); err != nil {
					t.Errorf("%T: %v", cmd.Body, err)
				}
				lateSeq.Store(res.GetAppend().GetFirstSeq())
			}
		})
	}
	sp := &spy{Adapter: echo.New(echo.Options{})}
	first := l.input(id, "first")
	l.startRunnerWith(nil, sp)
	s := l.waitSession(id, "the late input's turn", turnsDone(1))
	late := lateSeq.Load()

	evs := l.journal(id)
	got := completedFor(t, evs, late)
	if got.Status != "completed" || got.ContextInputs != 1 || s.ResetSeq == 0 || s.ResetSeq > late {
		t.Fatalf("turn.completed of the late input %d: %+v (reset at %d), want completed with context_inputs 1", late, got, s.ResetSeq)
	}
	tr := transcript(evs, late)
	if !strings.Contains(tr, "output:echo: late\nturn.completed:turn 1 done") || strings.Contains(transcript(evs, 0), "echo: first") {
		t.Fatalf("transcript after the late input:\n%s\nwant the late input answered and input %d never", tr, first)
	}
	starts, _ := sp.snapshot()
	if n := len(starts); n == 0 || starts[n-1].resetSeq != s.ResetSeq || starts[n-1].firstSeq <= s.ResetSeq {
		t.Fatalf("runtimes %+v: want the turn's runtime to start after the reset at %d", starts, s.ResetSeq)
	}
	// One turn ran and one was charged: the late input's. The first was
	// dropped by the reset before any turn started on it.
	e := l.waitEnvelope(id, "the charges", func(e *fsmpb.Envelope) bool { return e.Used.GetTurns() == 1 })
	if e.Used.GetQueries() != 1 {
		t.Fatalf("envelope used %v, want 1 turn and 1 query", e.Used)
	}
}
