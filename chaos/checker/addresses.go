package checker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/fak-dev/fak/chaos/history"
)

// Address violations.
const (
	// AddressChanged: an address a client observed (an acknowledged append,
	// a read, a watch) holds a different event in the final journal.
	AddressChanged ViolationKind = "address-changed"
	// AddressGone: the final journal no longer reaches an address a client
	// observed (including a head reported by a compare mismatch).
	AddressGone ViolationKind = "address-gone"
	// WatchGap: a watch stream delivered an address out of order (a gap or
	// a repeat); the op's Error says which.
	WatchGap ViolationKind = "watch-gap"
)

// AddressResult is the outcome of Addresses.
type AddressResult struct {
	Ok bool
	// Acks, Reads, Watches and Heads count the observations checked:
	// acknowledged appends, OK reads and watch deliveries recorded with
	// their addresses, and heads reported by compare mismatches.
	Acks, Reads, Watches, Heads int
	// Addresses is the number of (session, seq) pairs those observations
	// covered, counted once per observation.
	Addresses  int
	Violations []Violation // sorted by session, then seq
}

// Addresses checks that every (session, seq) → event a client was ever
// shown still names the same event in the final journals: the address is
// the cursor a client resumes from, so it must never name another event.
// Durable checks the workload's own values; this checks every event a
// client observed, whoever wrote it, through the digests recorded with
// reads and watches.
func Addresses(ops []history.Op, final map[string]Journal) AddressResult {
	var r AddressResult
	for k := range ops {
		op := &ops[k]
		j, have := final[op.Session]
		gone := func(seq uint64, what string) {
			detail := fmt.Sprintf("%s, but the final journal ends at seq %d", what, j.Len())
			if !have {
				detail = what + ", but the session is missing from the final read"
			}
			r.Violations = append(r.Violations, Violation{Kind: AddressGone, Session: op.Session, Seq: seq, Value: op.Value, Detail: detail})
		}
		switch {
		case op.Kind == history.Append && op.Outcome == history.OK:
			r.Acks++
			r.Addresses++
			e, ok := j.At(op.Seq)
			switch {
			case !ok:
				gone(op.Seq, fmt.Sprintf("acknowledged at seq %d (node %s)", op.Seq, op.Node))
			case !e.Value || e.Text != op.Value:
				r.Violations = append(r.Violations, Violation{Kind: AddressChanged, Session: op.Session, Seq: op.Seq, Value: op.Value,
					Detail: fmt.Sprintf("acknowledged at this seq (node %s); the final journal holds %s there", op.Node, describeEvent(e))})
			}
		case op.Kind == history.Append && op.Mismatch:
			r.Heads++
			if op.HeadSeq > j.Len() || !have {
				gone(op.HeadSeq, fmt.Sprintf("a compare mismatch reported head %d (node %s)", op.HeadSeq, op.Node))
			}
		case op.Kind == history.Watch && op.Outcome == history.Fail:
			r.Watches++
			r.Violations = append(r.Violations, Violation{Kind: WatchGap, Session: op.Session, Seq: op.HeadSeq + 1,
				Detail: fmt.Sprintf("a watch from seq %d (node %s): %s", op.FromSeq, op.Node, op.Error)})
		case (op.Kind == history.Read || op.Kind == history.Watch) && op.Outcome == history.OK && op.Digest != "":
			from := max(op.FromSeq, 1)
			if op.Kind == history.Read {
				r.Reads++
			} else {
				r.Watches++
			}
			if op.HeadSeq < from {
				continue // observed nothing
			}
			r.Addresses += int(op.HeadSeq - from + 1)
			evs, ok := j.Range(from, op.HeadSeq)
			switch {
			case !ok:
				gone(op.HeadSeq, fmt.Sprintf("a %s (node %s) observed seqs %d..%d", op.Kind, op.Node, from, op.HeadSeq))
			case RangeDigest(evs) != op.Digest:
				r.Violations = append(r.Violations, Violation{Kind: AddressChanged, Session: op.Session, Seq: from,
					Detail: fmt.Sprintf("a %s (node %s, history[%d]) observed seqs %d..%d; the final journal holds other events there%s",
						op.Kind, op.Node, k, from, op.HeadSeq, firstMoved(op, j))})
			}
		}
	}
	sort.SliceStable(r.Violations, func(a, b int) bool {
		va, vb := r.Violations[a], r.Violations[b]
		if va.Session != vb.Session {
			return va.Session < vb.Session
		}
		return va.Seq < vb.Seq
	})
	r.Ok = len(r.Violations) == 0
	return r
}

// firstMoved names the first workload value a read saw at a seq the final
// journal gives to something else, if the read recorded its values' seqs.
func firstMoved(op *history.Op, j Journal) string {
	for k, v := range op.Values {
		if k >= len(op.Seqs) {
			break
		}
		if e, ok := j.At(op.Seqs[k]); !ok || !e.Value || e.Text != v {
			return fmt.Sprintf(" (first: %q at seq %d, now %s)", v, op.Seqs[k], describeEvent(e))
		}
	}
	return ""
}

func describeEvent(e Event) string {
	switch {
	case e.Seq == 0:
		return "nothing"
	case e.Value:
		return fmt.Sprintf("%q", e.Text)
	default:
		return "a " + e.Kind + " event"
	}
}

// Summary describes the result in a line, plus the first few violations.
func (r AddressResult) Summary() string {
	var b strings.Builder
	if r.Ok {
		b.WriteString("addresses: OK")
	} else {
		fmt.Fprintf(&b, "addresses: VIOLATED (%d)", len(r.Violations))
	}
	fmt.Fprintf(&b, ": %d addresses observed by %d acknowledged appends, %d reads, %d watch deliveries and %d mismatch heads, checked against the final journals",
		r.Addresses, r.Acks, r.Reads, r.Watches, r.Heads)
	writeViolations(&b, r.Violations)
	return b.String()
}

// String is Summary.
func (r AddressResult) String() string { return r.Summary() }
