package checker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/fak-dev/fak/chaos/history"
)

// ViolationKind classifies a durability violation.
type ViolationKind string

const (
	// LostWrite: an acknowledged append is not in the final journal.
	LostWrite ViolationKind = "lost-write"
	// MovedWrite: an acknowledged append is in the final journal, but not
	// at the seq it was acknowledged with.
	MovedWrite ViolationKind = "moved-write"
	// Duplicate: a value appears in a journal more often than it was
	// appended (an append applied twice).
	Duplicate ViolationKind = "duplicate"
	// Phantom: a journal holds a value no append to that session attempted.
	Phantom ViolationKind = "phantom"
	// FailedPresent: an append that certainly failed (Fail, including CAS
	// mismatches) is in the journal.
	FailedPresent ViolationKind = "failed-append-present"
	// ReadLost: an OK read returned data the final journal does not hold
	// at the same position: the read is not a prefix of the final journal.
	// This catches the loss of Info appends that a read had observed.
	ReadLost ViolationKind = "read-lost"
)

// Violation is one durability problem.
type Violation struct {
	Kind    ViolationKind
	Session string
	// Seq is the position concerned. For LostWrite and MovedWrite it is the
	// acknowledged seq. For Duplicate, Phantom and FailedPresent it is where
	// the value sits in the journal. For ReadLost it is the first position
	// where a read and the final journal differ.
	Seq    uint64
	Value  string
	Detail string // what is there instead, and where the value is
}

func (v Violation) String() string {
	s := fmt.Sprintf("%s: session %q seq %d value %q", v.Kind, v.Session, v.Seq, v.Value)
	if v.Detail != "" {
		s += ": " + v.Detail
	}
	return s
}

// DurabilityResult is the outcome of Durable.
type DurabilityResult struct {
	Ok         bool
	Violations []Violation // sorted by session, then seq
	// Sessions counts the sessions in the history or in the final read.
	Sessions int
	// MissingSessions are sessions of the history that the final read does
	// not have. Every acknowledged append in them is lost.
	MissingSessions []string
	// Events is the number of values in the final journals.
	Events int
	// Acked is the number of acknowledged (OK) appends. Present counts those
	// found at exactly their acknowledged seq.
	Acked   int
	Present int
	// InfoLanded and InfoMissing split the appends with unknown outcome
	// into those that are in the final journal and those that are not.
	InfoLanded  int
	InfoMissing int
	// Failed is the number of appends that certainly failed, including CAS
	// mismatches. None of them may be present.
	Failed int
}

// Durable checks a history against the journals read after the final heal
// and restart. Sessions are matched by id. An acknowledged append must be at
// exactly the address it was acknowledged with, whatever else the fleet
// wrote into the journal meanwhile (a recovery move's events take addresses
// too). A session of the history that is missing from final is treated as
// empty and listed in MissingSessions.
func Durable(ops []history.Op, final map[string]Journal) DurabilityResult {
	type sessionOps struct {
		appends []*history.Op
		reads   []*history.Op
	}
	by := map[string]*sessionOps{}
	home := map[string][]string{} // value → sessions that appended it
	for k := range ops {
		op := &ops[k]
		s := by[op.Session]
		if s == nil {
			s = &sessionOps{}
			by[op.Session] = s
		}
		switch op.Kind {
		case history.Append:
			s.appends = append(s.appends, op)
			home[op.Value] = append(home[op.Value], op.Session)
		case history.Read:
			if op.Outcome == history.OK {
				s.reads = append(s.reads, op)
			}
		}
	}
	ids := make([]string, 0, len(by)+len(final))
	for id := range by {
		ids = append(ids, id)
	}
	for id := range final {
		if by[id] == nil {
			ids = append(ids, id)
			by[id] = &sessionOps{}
		}
	}
	sort.Strings(ids)

	r := DurabilityResult{Sessions: len(ids)}
	for _, id := range ids {
		journal, ok := final[id]
		if !ok {
			r.MissingSessions = append(r.MissingSessions, id)
		}
		s := by[id]
		vs := durableSession(&r, id, s.appends, s.reads, journal, !ok, home)
		sort.SliceStable(vs, func(i, j int) bool { return vs[i].Seq < vs[j].Seq })
		r.Violations = append(r.Violations, vs...)
	}
	r.Ok = len(r.Violations) == 0
	return r
}

// durableSession checks one session and updates the counts in r.
func durableSession(r *DurabilityResult, id string, appends, reads []*history.Op, journal Journal, missing bool, home map[string][]string) []Violation {
	var out []Violation
	add := func(kind ViolationKind, seq uint64, value, format string, args ...any) {
		out = append(out, Violation{Kind: kind, Session: id, Seq: seq, Value: value, Detail: fmt.Sprintf(format, args...)})
	}
	at := func(seq uint64) string {
		e, ok := journal.At(seq)
		switch {
		case missing:
			return "the session is missing from the final read"
		case !ok:
			return fmt.Sprintf("the journal ends at seq %d", journal.Len())
		case e.Value:
			return fmt.Sprintf("seq %d holds %q", seq, e.Text)
		default:
			return fmt.Sprintf("seq %d holds a %s event", seq, e.Kind)
		}
	}
	where := map[string][]uint64{} // value → seqs holding it
	for _, e := range journal.Events {
		if e.Value {
			r.Events++
			where[e.Text] = append(where[e.Text], e.Seq)
		}
	}

	// Acknowledged, unknown and failed appends.
	allowed := map[string]int{} // value → appends that may have applied it
	failed := map[string]*history.Op{}
	for _, op := range appends {
		seqs := where[op.Value]
		switch op.Outcome {
		case history.OK:
			allowed[op.Value]++
			r.Acked++
			switch {
			case containsSeq(seqs, op.Seq):
				r.Present++
			case len(seqs) > 0:
				add(MovedWrite, op.Seq, op.Value, "acknowledged at seq %d but found at seq %v; %s", op.Seq, seqs, at(op.Seq))
			default:
				add(LostWrite, op.Seq, op.Value, "%s", at(op.Seq))
			}
		case history.Info:
			allowed[op.Value]++
			if len(seqs) > 0 {
				r.InfoLanded++
			} else {
				r.InfoMissing++
			}
		case history.Fail:
			r.Failed++
			failed[op.Value] = op
		}
	}

	// Every value in the journal: duplicates, phantoms, failed appends.
	reported := map[string]bool{}
	for _, e := range journal.Events {
		seq, v := e.Seq, e.Text
		if !e.Value || reported[v] {
			continue
		}
		seqs := where[v]
		n := allowed[v]
		switch {
		case n == 0 && failed[v] != nil:
			reported[v] = true
			op := failed[v]
			why := "failed"
			if op.Mismatch {
				why = fmt.Sprintf("failed with a CAS mismatch (expected %d, head %d)", op.ExpectedSeq, op.HeadSeq)
			}
			add(FailedPresent, seq, v, "the append %s but the value is at seq %v", why, seqs)
		case n == 0:
			reported[v] = true
			detail := "no append in the history has this value"
			if others := home[v]; len(others) > 0 {
				detail = fmt.Sprintf("the value was appended to session(s) %q, not this one", others)
			}
			add(Phantom, seq, v, "%s", detail)
		case len(seqs) > n:
			reported[v] = true
			add(Duplicate, seq, v, "at seqs %v but appended %d time(s)", seqs, n)
		}
	}

	// Every value an OK read returned must still be at the seq the read
	// found it at (reads recorded without seqs: at its position among the
	// values). Report each lost position once, with how many reads saw
	// something else there.
	type lost struct {
		seq   uint64
		value string
	}
	seen := map[lost]int{}
	var order []lost
	values := journal.Values()
	for _, op := range reads {
		for k, v := range op.Values {
			var held bool
			seq := uint64(k) + 1
			if k < len(op.Seqs) {
				seq = op.Seqs[k]
				e, ok := journal.At(seq)
				held = ok && e.Value && e.Text == v
			} else {
				held = k < len(values) && values[k] == v
			}
			if missing || !held {
				l := lost{seq, v}
				if seen[l] == 0 {
					order = append(order, l)
				}
				seen[l]++
				break
			}
		}
	}
	for _, l := range order {
		add(ReadLost, l.seq, l.value, "%d OK read(s) returned this value at this seq, but %s", seen[l], at(l.seq))
	}
	return out
}

func containsSeq(seqs []uint64, seq uint64) bool {
	for _, s := range seqs {
		if s == seq {
			return true
		}
	}
	return false
}

// Summary describes the result in a line, plus one line for each of the
// first few violations.
func (r DurabilityResult) Summary() string {
	var b strings.Builder
	if r.Ok {
		b.WriteString("durable: OK")
	} else {
		counts := map[ViolationKind]int{}
		var kinds []ViolationKind
		for _, v := range r.Violations {
			if counts[v.Kind] == 0 {
				kinds = append(kinds, v.Kind)
			}
			counts[v.Kind]++
		}
		sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
		var parts []string
		for _, k := range kinds {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
		fmt.Fprintf(&b, "durable: VIOLATED (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, ": %d session(s), %d events; acked appends %d/%d present; info appends %d landed, %d did not; %d failed appends",
		r.Sessions, r.Events, r.Present, r.Acked, r.InfoLanded, r.InfoMissing, r.Failed)
	if len(r.MissingSessions) > 0 {
		fmt.Fprintf(&b, "; %d session(s) missing from the final read", len(r.MissingSessions))
	}
	writeViolations(&b, r.Violations)
	return b.String()
}

// String is Summary.
func (r DurabilityResult) String() string { return r.Summary() }

// writeViolations appends the first few violations to a summary, a line
// each.
func writeViolations(b *strings.Builder, vs []Violation) {
	const most = 5
	for k, v := range vs {
		if k == most {
			fmt.Fprintf(b, "\n  ... and %d more", len(vs)-most)
			break
		}
		b.WriteString("\n  " + v.String())
	}
}
