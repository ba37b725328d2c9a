package checker

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fak-dev/fak/chaos/history"
)

// validHistory has overlapping appends, CAS successes and mismatches, reads,
// Info appends that landed and that did not, and dropped operations, over two
// sessions. final is the journals it leaves.
func validHistory() ([]history.Op, map[string][]string) {
	ops := []history.Op{
		appendOK(0, "a", "a1", 0, 10, 1),
		appendOK(1, "a", "a2", 5, 20, 2), // overlaps a1
		readOK(2, "a", 12, 15, "a1"),     // a2 not yet applied
		casOK(0, "a", "a3", 2, 21, 30),   // seq 3
		casMismatch(1, "a", "a4", 2, 3, 22, 31),
		appendInfo(3, "a", "a5", 32), // landed (seen below)
		appendInfo(4, "a", "a6", 33), // never landed
		casInfo(5, "a", "a7", 0, 34), // compare can never hold
		readOK(2, "a", 40, 45, "a1", "a2", "a3", "a5"),
		appendOK(0, "a", "a8", 50, 60, 5),
		readOK(2, "a", 61, 62, "a1", "a2", "a3", "a5", "a8"),
		appendFail(1, "a", "a9", 63, 64),                     // dropped
		readInfo(2, "a", 65),                                 // dropped
		casOK(6, "a", "a10", 5, 70, 80),                      // seq 6
		readOK(7, "a", 70, 80, "a1", "a2", "a3", "a5", "a8"), // before a10

		appendOK(10, "b", "b1", 0, 100, 1),
		readOK(11, "b", 1, 2),
		casInfo(12, "b", "b2", 1, 5), // applies once b1 is in
		readOK(11, "b", 3, 4),
		readOK(11, "b", 101, 102, "b1", "b2"),
	}
	final := map[string][]string{
		"a": {"a1", "a2", "a3", "a5", "a8", "a10"},
		"b": {"b1", "b2"},
	}
	return ops, final
}

func TestValidHistory(t *testing.T) {
	ops, final := validHistory()
	viz := filepath.Join(t.TempDir(), "viz.html")
	r := Linearizable(ops, Options{VisualizePath: viz})
	t.Log(r.Summary())
	if r.Verdict != Ok || !r.Ok() {
		t.Fatalf("verdict %s, want ok", r.Verdict)
	}
	if len(r.Problems) != 0 {
		t.Errorf("problems: %q", r.Problems)
	}
	if r.Visualization != "" {
		t.Errorf("visualization %q written for an ok history", r.Visualization)
	}
	if _, err := os.Stat(viz); !os.IsNotExist(err) {
		t.Errorf("visualization file exists for an ok history (err %v)", err)
	}
	if r.Ops != len(ops) || r.Checked+r.Dropped != r.Ops || r.Dropped != 2 {
		t.Errorf("ops %d checked %d dropped %d", r.Ops, r.Checked, r.Dropped)
	}
	if len(r.Sessions) != 2 || r.Sessions[0].Session != "a" || r.Sessions[1].Session != "b" {
		t.Fatalf("sessions %+v", r.Sessions)
	}
	a := r.Sessions[0]
	want := SessionResult{Session: "a", Verdict: Ok, Checked: 13, Appends: 5, Mismatches: 1, Infos: 3, Reads: 4, Dropped: 2, Linearized: 13}
	a.Elapsed = 0
	if a != want {
		t.Errorf("session a: %+v\nwant        %+v", a, want)
	}

	d := Durable(ops, journals(final))
	t.Log(d.Summary())
	if !d.Ok {
		t.Fatalf("durable violations: %v", d.Violations)
	}
	if d.Acked != 6 || d.Present != 6 || d.InfoLanded != 2 || d.InfoMissing != 2 || d.Failed != 2 || d.Sessions != 2 || d.Events != 8 {
		t.Errorf("counts %+v", d)
	}
}

// TestIllegal runs known non-linearizable histories, each with a legal twin
// that differs only in the detail that makes it illegal.
func TestIllegal(t *testing.T) {
	cases := []struct {
		name      string
		bad, good []history.Op
	}{
		{
			name: "read sees a value before its append was invoked",
			bad:  []history.Op{appendOK(0, "x", "v1", 10, 20, 1), readOK(1, "x", 0, 5, "v1")},
			good: []history.Op{appendOK(0, "x", "v1", 10, 20, 1), readOK(1, "x", 15, 25, "v1")},
		},
		{
			name: "second of two sequential reads misses a value",
			bad:  []history.Op{appendOK(0, "x", "v1", 0, 100, 1), readOK(1, "x", 10, 20, "v1"), readOK(1, "x", 30, 40)},
			good: []history.Op{appendOK(0, "x", "v1", 0, 100, 1), readOK(1, "x", 10, 20), readOK(1, "x", 30, 40, "v1")},
		},
		{
			name: "two appends acknowledged with the same seq",
			bad:  []history.Op{appendOK(0, "x", "v1", 0, 10, 1), appendOK(1, "x", "v2", 0, 10, 1)},
			good: []history.Op{appendOK(0, "x", "v1", 0, 10, 1), appendOK(1, "x", "v2", 0, 10, 2)},
		},
		{
			name: "CAS mismatch reports a head no linearization allows",
			bad:  []history.Op{appendOK(0, "x", "v1", 0, 10, 1), casMismatch(1, "x", "v2", 0, 2, 20, 30)},
			good: []history.Op{appendOK(0, "x", "v1", 0, 10, 1), casMismatch(1, "x", "v2", 0, 1, 20, 30)},
		},
		{
			name: "CAS mismatch reports the expected head",
			bad:  []history.Op{appendOK(0, "x", "v1", 0, 10, 1), casMismatch(1, "x", "v2", 1, 1, 20, 30)},
			good: []history.Op{appendOK(0, "x", "v1", 0, 10, 1), casMismatch(1, "x", "v2", 0, 1, 20, 30)},
		},
		{
			name: "CAS succeeds although the head moved",
			bad:  []history.Op{appendOK(0, "x", "v1", 0, 10, 1), casOK(1, "x", "v2", 0, 20, 30)},
			good: []history.Op{appendOK(0, "x", "v1", 0, 10, 1), casOK(1, "x", "v2", 1, 20, 30)},
		},
		{
			name: "acknowledged append missing from a later read",
			bad:  []history.Op{appendOK(0, "x", "v1", 0, 10, 1), readOK(1, "x", 20, 30)},
			good: []history.Op{appendOK(0, "x", "v1", 0, 10, 1), readOK(1, "x", 5, 30)},
		},
		{
			name: "read returns a value nobody appended",
			bad:  []history.Op{appendOK(0, "x", "v1", 0, 10, 1), readOK(1, "x", 20, 30, "v1", "ghost")},
			good: []history.Op{appendOK(0, "x", "v1", 0, 10, 1), readOK(1, "x", 20, 30, "v1")},
		},
		{
			name: "info append placed before an append acknowledged with seq 1",
			bad:  []history.Op{appendInfo(0, "x", "v1", 0), appendOK(1, "x", "v2", 10, 20, 1), readOK(2, "x", 30, 40, "v1", "v2")},
			good: []history.Op{appendInfo(0, "x", "v1", 0), appendOK(1, "x", "v2", 10, 20, 1), readOK(2, "x", 30, 40, "v2", "v1")},
		},
		{
			name: "reads disagree on the order of two info appends",
			bad: []history.Op{appendInfo(0, "x", "v1", 0), appendInfo(1, "x", "v2", 0),
				readOK(2, "x", 10, 20, "v1", "v2"), readOK(3, "x", 30, 40, "v2", "v1")},
			good: []history.Op{appendInfo(0, "x", "v1", 0), appendInfo(1, "x", "v2", 0),
				readOK(2, "x", 10, 20, "v1"), readOK(3, "x", 30, 40, "v1", "v2")},
		},
		{
			name: "info CAS applied although its compare could not hold",
			bad:  []history.Op{appendOK(0, "x", "v1", 0, 10, 1), casInfo(1, "x", "v2", 0, 20), readOK(2, "x", 30, 40, "v1", "v2")},
			good: []history.Op{appendOK(0, "x", "v1", 0, 10, 1), casInfo(1, "x", "v2", 1, 20), readOK(2, "x", 30, 40, "v1", "v2")},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			viz := filepath.Join(t.TempDir(), "viz.html")
			r := Linearizable(c.bad, Options{VisualizePath: viz})
			t.Log(r.Summary())
			if r.Verdict != Illegal {
				t.Fatalf("verdict %s, want illegal", r.Verdict)
			}
			if !slices.Equal(r.IllegalSessions, []string{"x"}) {
				t.Errorf("illegal sessions %q", r.IllegalSessions)
			}
			if r.Visualization != viz || r.VisualizeErr != nil {
				t.Errorf("visualization %q, err %v", r.Visualization, r.VisualizeErr)
			}
			checkVisualization(t, viz)
			if !strings.Contains(r.Summary(), `"x"`) {
				t.Errorf("summary does not name the session: %s", r.Summary())
			}

			if g := Linearizable(c.good, Options{}); g.Verdict != Ok {
				t.Errorf("legal twin: %s", g.Summary())
			}
		})
	}
}

func checkVisualization(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("visualization: %v", err)
	}
	if !strings.Contains(string(b), "<html") {
		t.Errorf("visualization is not HTML (%d bytes)", len(b))
	}
}

func TestSeveralIllegalSessions(t *testing.T) {
	ops := []history.Op{
		appendOK(0, "p", "p1", 0, 10, 1), readOK(1, "p", 20, 30, "p1"),
		appendOK(2, "q", "q1", 0, 100, 1), readOK(3, "q", 10, 20, "q1"), readOK(3, "q", 30, 40),
		appendOK(4, "r", "r1", 0, 10, 1), appendOK(5, "r", "r2", 0, 10, 1),
	}
	viz := filepath.Join(t.TempDir(), "viz.html")
	r := Linearizable(ops, Options{VisualizePath: viz, Parallelism: 2})
	t.Log(r.Summary())
	if r.Verdict != Illegal || !slices.Equal(r.IllegalSessions, []string{"q", "r"}) {
		t.Fatalf("verdict %s, illegal %q", r.Verdict, r.IllegalSessions)
	}
	if len(r.Sessions) != 3 || r.Sessions[0].Verdict != Ok {
		t.Errorf("sessions %+v", r.Sessions)
	}
	checkVisualization(t, viz)
}

// TestUnknownOnTimeout gives porcupine a search it cannot finish: many
// concurrent Info appends and a read no order of them explains.
func TestUnknownOnTimeout(t *testing.T) {
	var ops []history.Op
	for k := range 16 {
		ops = append(ops, appendInfo(k, "slow", "v"+string(rune('a'+k)), 0))
	}
	ops = append(ops, readOK(99, "slow", 100, 110, "ghost"))
	ops = append(ops, appendOK(100, "fast", "f1", 0, 10, 1))
	viz := filepath.Join(t.TempDir(), "viz.html")
	r := Linearizable(ops, Options{Timeout: 200 * time.Millisecond, VisualizePath: viz})
	t.Log(r.Summary())
	if r.Verdict != Unknown || !slices.Equal(r.UnknownSessions, []string{"slow"}) || len(r.IllegalSessions) != 0 {
		t.Fatalf("verdict %s, unknown %q, illegal %q", r.Verdict, r.UnknownSessions, r.IllegalSessions)
	}
	if _, err := os.Stat(viz); !os.IsNotExist(err) {
		t.Errorf("visualization written for an unknown verdict (err %v)", err)
	}
}

func TestMalformedOps(t *testing.T) {
	ops := []history.Op{
		appendOK(0, "m", "v1", 0, 10, 0), // no seq
		{Client: 1, Session: "m", Kind: history.Append, Value: "v2", Outcome: history.Fail, Mismatch: true, Call: 20, Return: 30},
		{Client: 2, Session: "m", Kind: "delete", Outcome: history.OK, Call: 20, Return: 30},
		readOK(3, "m", 50, 40, "v1"), // returns before its call
	}
	r := Linearizable(ops, Options{})
	t.Log(r.Summary())
	if len(r.Problems) != 4 {
		t.Errorf("problems %q", r.Problems)
	}
	if r.Verdict != Illegal {
		t.Errorf("verdict %s: an OK append without a seq cannot linearize", r.Verdict)
	}
	if r.Checked != 2 || r.Dropped != 2 {
		t.Errorf("checked %d dropped %d", r.Checked, r.Dropped)
	}
}

func TestEmptyHistory(t *testing.T) {
	r := Linearizable(nil, Options{})
	if r.Verdict != Ok || len(r.Sessions) != 0 {
		t.Fatalf("%s", r.Summary())
	}
	if d := Durable(nil, nil); !d.Ok {
		t.Fatalf("%s", d.Summary())
	}
}

// TestManySessions checks a generated history of 50 sessions with a few
// hundred operations each, then the same history with one session broken.
func TestManySessions(t *testing.T) {
	ops, final := genHistory(1, 50, 4, 300)
	r := Linearizable(ops, Options{})
	t.Log(r.Summary())
	if r.Verdict != Ok {
		t.Fatalf("generated history: %s", r.Summary())
	}
	if len(r.Sessions) != 50 || r.Infos == 0 || r.Dropped == 0 {
		t.Errorf("sessions %d infos %d dropped %d", len(r.Sessions), r.Infos, r.Dropped)
	}
	var mismatches int
	for _, s := range r.Sessions {
		mismatches += s.Mismatches
	}
	if mismatches == 0 {
		t.Error("generator made no CAS mismatches")
	}
	d := Durable(ops, journals(final))
	t.Log(d.Summary())
	if !d.Ok || d.InfoLanded == 0 || d.InfoMissing == 0 {
		t.Fatalf("durable: %s", d.Summary())
	}

	// Acknowledge two appends of s17 with the same seq.
	broken := slices.Clone(ops)
	var first *history.Op
	for k := range broken {
		op := &broken[k]
		if op.Session != "s17" || op.Kind != history.Append || op.Outcome != history.OK {
			continue
		}
		if first == nil {
			first = op
			continue
		}
		op.Seq = first.Seq
		break
	}
	viz := filepath.Join(t.TempDir(), "viz.html")
	r = Linearizable(broken, Options{VisualizePath: viz})
	t.Log(r.Summary())
	if r.Verdict != Illegal || !slices.Equal(r.IllegalSessions, []string{"s17"}) {
		t.Fatalf("broken history: %s", r.Summary())
	}
	checkVisualization(t, viz)
}

func BenchmarkLinearizable(b *testing.B) {
	ops, _ := genHistory(1, 50, 4, 300)
	for b.Loop() {
		if r := Linearizable(ops, Options{}); r.Verdict != Ok {
			b.Fatal(r.Summary())
		}
	}
}

func BenchmarkDurable(b *testing.B) {
	ops, final := genHistory(1, 50, 4, 300)
	for b.Loop() {
		if r := Durable(ops, journals(final)); !r.Ok {
			b.Fatal(r.Summary())
		}
	}
}

// TestNarrowedWindowsKeepVerdicts checks small random histories, many with
// Info appends and many deliberately broken, twice: with Info windows as
// recorded and as narrowed by infoWindows. The verdicts must agree.
func TestNarrowedWindowsKeepVerdicts(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	counts := map[Verdict]int{}
	for n := range 400 {
		next := 0
		ops, _ := genSession(rng, "s", 3, 24, 25, &next)
		what := "unbroken"
		if n%4 != 0 {
			what = corrupt(rng, ops)
		}
		recorded := Linearizable(ops, Options{recorded: true})
		narrowed := Linearizable(ops, Options{})
		if recorded.Verdict != narrowed.Verdict || recorded.Verdict == Unknown {
			t.Fatalf("history %d (%s): recorded windows %s, narrowed %s\n%s", n, what, recorded.Verdict, narrowed.Verdict, dump(ops))
		}
		if what == "unbroken" && narrowed.Verdict != Ok {
			t.Fatalf("history %d: generated history is %s\n%s", n, narrowed.Verdict, dump(ops))
		}
		counts[narrowed.Verdict]++
	}
	t.Logf("verdicts: %v", counts)
	if counts[Ok] < 100 || counts[Illegal] < 100 {
		t.Errorf("verdicts %v: both outcomes should be well represented", counts)
	}
}

// corrupt breaks one thing in a generated history, in place, and says what.
// The result is often, not always, illegal.
func corrupt(rng *rand.Rand, ops []history.Op) string {
	pick := func(ok func(*history.Op) bool) *history.Op {
		var c []*history.Op
		for k := range ops {
			if ok(&ops[k]) {
				c = append(c, &ops[k])
			}
		}
		if len(c) == 0 {
			return nil
		}
		return c[rng.IntN(len(c))]
	}
	isRead := func(op *history.Op) bool {
		return op.Kind == history.Read && op.Outcome == history.OK && len(op.Values) > 0
	}
	for {
		switch rng.IntN(6) {
		case 0:
			if r := pick(isRead); r != nil {
				k := rng.IntN(len(r.Values))
				r.Values = slices.Delete(slices.Clone(r.Values), k, k+1)
				return "read misses a value"
			}
		case 1:
			if r := pick(func(op *history.Op) bool { return isRead(op) && len(op.Values) > 1 }); r != nil {
				k := rng.IntN(len(r.Values) - 1)
				r.Values = slices.Clone(r.Values)
				r.Values[k], r.Values[k+1] = r.Values[k+1], r.Values[k]
				return "read swaps two values"
			}
		case 2:
			r := pick(func(op *history.Op) bool { return op.Kind == history.Read && op.Outcome == history.OK })
			a := pick(func(op *history.Op) bool { return op.Kind == history.Append && op.Outcome == history.Info })
			if r != nil && a != nil && !slices.Contains(r.Values, a.Value) {
				r.Values = append(slices.Clone(r.Values), a.Value)
				return "read sees an info append"
			}
		case 3:
			if a := pick(func(op *history.Op) bool { return op.Kind == history.Append && op.Outcome == history.OK }); a != nil {
				a.Seq++
				return "append acknowledged with the next seq"
			}
		case 4:
			if a := pick(func(op *history.Op) bool { return op.Mismatch }); a != nil {
				a.HeadSeq++
				return "mismatch reports the next head"
			}
		case 5:
			if a := pick(func(op *history.Op) bool { return op.Kind == history.Append && op.Outcome == history.Info }); a != nil {
				a.Call += 60
				return "info append invoked later"
			}
		}
	}
}

func dump(ops []history.Op) string {
	var b strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&b, "  c%d %s %s %q cas=%v exp=%d -> %s seq=%d mismatch=%v head=%d values=%q [%d,%d]\n",
			op.Client, op.Kind, op.Session, op.Value, op.CAS, op.ExpectedSeq, op.Outcome, op.Seq, op.Mismatch, op.HeadSeq, op.Values, op.Call, op.Return)
	}
	return b.String()
}
