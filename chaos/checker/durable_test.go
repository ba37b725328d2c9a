package checker

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fak-dev/fak/chaos/history"
)

func TestDurableViolations(t *testing.T) {
	base := []history.Op{
		appendOK(0, "x", "v1", 0, 10, 1),
		appendOK(1, "x", "v2", 5, 15, 2),
	}
	with := func(extra ...history.Op) []history.Op { return append(slices.Clone(base), extra...) }
	type want struct {
		kind    ViolationKind
		seq     uint64
		value   string
		session string // "x" if empty
		detail  string // substring of Detail
	}
	cases := []struct {
		name  string
		ops   []history.Op
		final map[string][]string
		want  []want
	}{
		{
			name:  "lost write",
			ops:   base,
			final: map[string][]string{"x": {"v1"}},
			want:  []want{{kind: LostWrite, seq: 2, value: "v2", detail: "journal ends at seq 1"}},
		},
		{
			name:  "lost write replaced by another value",
			ops:   with(appendInfo(2, "x", "v3", 20)),
			final: map[string][]string{"x": {"v1", "v3"}},
			want:  []want{{kind: LostWrite, seq: 2, value: "v2", detail: `seq 2 holds "v3"`}},
		},
		{
			name:  "writes at other seqs",
			ops:   base,
			final: map[string][]string{"x": {"v2", "v1"}},
			want: []want{
				{kind: MovedWrite, seq: 1, value: "v1", detail: "found at seq [2]"},
				{kind: MovedWrite, seq: 2, value: "v2", detail: "found at seq [1]"},
			},
		},
		{
			name:  "acknowledged append applied twice",
			ops:   base,
			final: map[string][]string{"x": {"v1", "v2", "v2"}},
			want:  []want{{kind: Duplicate, seq: 2, value: "v2", detail: "at seqs [2 3]"}},
		},
		{
			name:  "info append applied twice",
			ops:   with(appendInfo(2, "x", "v3", 20)),
			final: map[string][]string{"x": {"v1", "v2", "v3", "v3"}},
			want:  []want{{kind: Duplicate, seq: 3, value: "v3"}},
		},
		{
			name:  "phantom",
			ops:   base,
			final: map[string][]string{"x": {"v1", "v2", "zz"}},
			want:  []want{{kind: Phantom, seq: 3, value: "zz", detail: "no append"}},
		},
		{
			name:  "value of another session",
			ops:   with(appendInfo(2, "y", "w1", 20)),
			final: map[string][]string{"x": {"v1", "v2", "w1"}, "y": {}},
			want:  []want{{kind: Phantom, seq: 3, value: "w1", detail: `["y"]`}},
		},
		{
			name:  "session only in the final read",
			ops:   base,
			final: map[string][]string{"x": {"v1", "v2"}, "z": {"q"}},
			want:  []want{{kind: Phantom, seq: 1, value: "q", session: "z"}},
		},
		{
			name:  "failed append present",
			ops:   with(appendFail(2, "x", "v3", 20, 30)),
			final: map[string][]string{"x": {"v1", "v2", "v3"}},
			want:  []want{{kind: FailedPresent, seq: 3, value: "v3"}},
		},
		{
			name:  "CAS mismatch present",
			ops:   with(casMismatch(2, "x", "v3", 1, 2, 20, 30)),
			final: map[string][]string{"x": {"v1", "v2", "v3"}},
			want:  []want{{kind: FailedPresent, seq: 3, value: "v3", detail: "CAS mismatch (expected 1, head 2)"}},
		},
		{
			name:  "session missing from the final read",
			ops:   with(appendOK(2, "y", "w1", 0, 10, 1)),
			final: map[string][]string{"x": {"v1", "v2"}},
			want:  []want{{kind: LostWrite, seq: 1, value: "w1", session: "y", detail: "missing"}},
		},
		{
			name: "observed info append lost",
			ops: with(appendInfo(2, "x", "v3", 20),
				readOK(3, "x", 30, 40, "v1", "v2", "v3"), readOK(4, "x", 30, 40, "v1", "v2", "v3")),
			final: map[string][]string{"x": {"v1", "v2"}},
			want:  []want{{kind: ReadLost, seq: 3, value: "v3", detail: "2 OK read(s)"}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Durable(c.ops, journals(c.final))
			t.Log(r.Summary())
			if r.Ok {
				t.Fatal("durable: ok, want violations")
			}
			if len(r.Violations) != len(c.want) {
				t.Fatalf("violations:\n%s\nwant %d", violationLines(r.Violations), len(c.want))
			}
			for k, w := range c.want {
				v := r.Violations[k]
				session := w.session
				if session == "" {
					session = "x"
				}
				if v.Kind != w.kind || v.Session != session || v.Seq != w.seq || v.Value != w.value || !strings.Contains(v.Detail, w.detail) {
					t.Errorf("violation %d: %v\nwant %+v", k, v, w)
				}
				if !strings.Contains(r.Summary(), string(w.kind)) {
					t.Errorf("summary does not mention %s", w.kind)
				}
			}
		})
	}
}

func TestDurableMissingSessionCounts(t *testing.T) {
	ops := []history.Op{
		appendOK(0, "x", "v1", 0, 10, 1),
		appendInfo(1, "x", "v2", 0),
		appendFail(2, "x", "v3", 0, 10),
		appendOK(3, "y", "w1", 0, 10, 1),
	}
	r := Durable(ops, journals(map[string][]string{"y": {"w1"}}))
	t.Log(r.Summary())
	if !slices.Equal(r.MissingSessions, []string{"x"}) {
		t.Errorf("missing %q", r.MissingSessions)
	}
	if r.Acked != 2 || r.Present != 1 || r.InfoMissing != 1 || r.Failed != 1 || r.Sessions != 2 || r.Events != 1 {
		t.Errorf("counts %+v", r)
	}
}

// TestDurableGenerated drops one acknowledged value from a large generated
// history's final journals.
func TestDurableGenerated(t *testing.T) {
	ops, final := genHistory(2, 50, 4, 200)
	if r := Durable(ops, journals(final)); !r.Ok {
		t.Fatalf("generated history: %s", r.Summary())
	}
	var victim history.Op
	for _, op := range ops {
		if op.Session == "s23" && op.Kind == history.Append && op.Outcome == history.OK {
			victim = op
			break
		}
	}
	j := slices.Clone(final["s23"])
	final["s23"] = slices.Delete(j, int(victim.Seq-1), int(victim.Seq))
	r := Durable(ops, journals(final))
	t.Log(r.Summary())
	if r.Ok || !slices.ContainsFunc(r.Violations, func(v Violation) bool {
		return v.Kind == LostWrite && v.Session == "s23" && v.Seq == victim.Seq && v.Value == victim.Value
	}) {
		t.Fatalf("lost write of %q at seq %d not reported", victim.Value, victim.Seq)
	}
	for _, v := range r.Violations {
		if v.Session != "s23" {
			t.Errorf("violation outside s23: %v", v)
		}
	}
}

func violationLines(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "  %v\n", v)
	}
	return b.String()
}
