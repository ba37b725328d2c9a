package runner_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Each turn is charged to the session's envelope as it starts (a turn and
// a query, in the write of turn.started) and as it completes (its output
// words, in the write of turn.completed). With a limit of two turns
// the third and later inputs are closed as refused at once, so the queue
// keeps moving; a clear does not buy new turns: the child shares the
// envelope and is refused too.
func TestRunner_TurnBudgetRefusesAndSurvivesAClear(t *testing.T) {
	l := newLocal(t)
	id := l.sessionWithPolicy("s1", "n1", "echo", &fsmpb.Policy{Limits: &fsmpb.Budget{Turns: 2}})
	l.startRunner(0, nil)
	var inputs []uint64
	for _, text := range []string{"one", "two words", "three", "four"} {
		inputs = append(inputs, l.input(id, text))
	}
	l.waitSession(id, "four turns closed", turnsDone(4))
	e := l.waitEnvelope(id, "the output charges", func(e *fsmpb.Envelope) bool { return e.Used.GetOutputTokens() == 2+3 })
	if e.Used.GetTurns() != 2 || e.Used.GetQueries() != 2 || e.Refusals != 2 {
		t.Fatalf("envelope used %v with %d refusals, want 2 turns, 2 queries, 2 refusals", e.Used, e.Refusals)
	}

	evs := l.journal(id)
	for i, in := range inputs {
		got := completedFor(t, evs, in)
		if i < 2 {
			if got.Status != "completed" {
				t.Errorf("turn %d: %+v, want completed", i+1, got)
			}
			continue
		}
		if got.Status != "refused" || got.Reason != "BUDGET_EXHAUSTED" || got.Text != "refused: turn budget exhausted" {
			t.Errorf("turn %d: %+v, want refused (BUDGET_EXHAUSTED)", i+1, got)
		}
	}
	// A refused turn: the refusal journaled by the envelope, then the turn
	// started and closed in one write, with no output.
	want := strings.Join([]string{
		"budget.exhausted:refused: turns exhausted",
		"turn.started:echo on n1", "turn.completed:refused: turn budget exhausted",
		"budget.exhausted:refused: turns exhausted",
		"turn.started:echo on n1", "turn.completed:refused: turn budget exhausted",
	}, "\n")
	if got := transcript(evs, completedFor(t, evs, inputs[1]).Seq); got != want {
		t.Fatalf("after turn 2:\n%s\nwant:\n%s", got, want)
	}
	for _, ev := range evs {
		if ev.Kind == fsm.KindTurnCompleted && ev.Text == "refused: turn budget exhausted" &&
			!strings.HasPrefix(string(ev.Data), `{"status":"refused","reason":"BUDGET_EXHAUSTED","input_seq":`) {
			t.Fatalf("refused turn.completed data %s", ev.Data)
		}
	}

	child := l.clear(id, "p-child")
	in := l.input(child, "again")
	l.waitSession(child, "the child's turn closed", turnsDone(1))
	if got := completedFor(t, l.journal(child), in); got.Status != "refused" || got.Reason != "BUDGET_EXHAUSTED" {
		t.Fatalf("child's turn: %+v, want refused: the envelope is shared", got)
	}
	if e := l.waitEnvelope(child, "the child's refusal", func(e *fsmpb.Envelope) bool { return e.Refusals == 3 }); e.Used.GetTurns() != 2 {
		t.Fatalf("envelope used %v after the clear, want still 2 turns", e.Used)
	}

	// A refusal is final: every turn was charged or refused in one write
	// (no retry of a refused turn, no double charge), and each completed
	// turn's output rode on its turn.completed.
	l.mu.Lock()
	turnCharges, usages, charges := slices.Clone(l.turnCharges), len(l.usages), len(l.charges)
	l.mu.Unlock()
	slices.Sort(turnCharges)
	if len(slices.Compact(slices.Clone(turnCharges))) != len(turnCharges) || len(turnCharges) != 5 {
		t.Fatalf("turn charges %v: want 5 turns charged or refused, each once", turnCharges)
	}
	if usages != 2 || charges != 0 {
		t.Fatalf("%d appends with usage and %d separate charges, want the 2 outputs on their turn.completed", usages, charges)
	}
}
