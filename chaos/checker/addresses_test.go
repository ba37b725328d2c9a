package checker

import (
	"fmt"
	"testing"

	"github.com/fak-dev/fak/chaos/history"
)

// The docker-mode chaos run of seed 1231730015 (issue 12) reported 61
// "moved" writes and 4 non-linearizable sessions. Its history shows what
// happened: a recovery move of a workload session wrote its six events
// (move.requested, checkpointed, admitted, restored, epoch.changed,
// cutover) at seqs 36..41, and the next append was acknowledged at 42 — the
// live reads already returned that value as the 36th value. The checkers
// read the final journal as values only and took "the i-th value" for
// "seq i": every address after the move looked shifted by six. Nothing was
// lost; the checkers did not know the fleet writes into workload sessions.
//
// recoveredSession rebuilds that shape: 35 values, the move, 4 more values,
// with the reads, compare mismatches and a watch clients observed.
func recoveredSession() ([]history.Op, Journal) {
	const s = "ses_recovered"
	var ops []history.Op
	j := Journal{}
	at := int64(0)
	tick := func() int64 { at += 10; return at }
	add := func(value string) {
		seq := j.Len() + 1
		op := casOK(1, s, value, seq-1, tick(), tick())
		j.Events = append(j.Events, Event{Seq: seq, Kind: "note", Text: value, Value: true})
		ops = append(ops, op)
	}
	read := func(node string) {
		op := readOK(2, s, tick(), tick(), j.Values()...)
		op.Node, op.HeadSeq, op.FromSeq = node, j.Len(), 1
		for _, e := range j.Events {
			if e.Value {
				op.Seqs = append(op.Seqs, e.Seq)
			}
		}
		op.Digest = RangeDigest(j.Events)
		ops = append(ops, op)
	}
	for i := 1; i <= 35; i++ {
		add(fmt.Sprintf("w-%d", i))
	}
	read("n1")
	for _, kind := range []string{"move.requested", "move.checkpointed", "move.admitted", "move.restored", "epoch.changed", "move.cutover"} {
		j.Events = append(j.Events, Event{Seq: j.Len() + 1, Kind: kind, Text: kind})
	}
	// A client still comparing against head 35 loses to the move.
	ops = append(ops, casMismatch(3, s, "late", 35, 41, tick(), tick()))
	read("n2")
	w := history.Op{Client: 4, Session: s, Kind: history.Watch, Outcome: history.OK, Node: "n3",
		FromSeq: 30, HeadSeq: 41, Digest: RangeDigest(j.Events[29:41]), Call: tick()}
	w.Return = tick()
	ops = append(ops, w)
	for i := 36; i <= 39; i++ {
		add(fmt.Sprintf("w-%d", i))
	}
	read("n3")
	return ops, j
}

func TestRecoveryMoveEventsKeepAddresses(t *testing.T) {
	ops, j := recoveredSession()
	final := map[string]Journal{"ses_recovered": j}

	if d := Durable(ops, final); !d.Ok {
		t.Errorf("durable: %s", d.Summary())
	}
	if a := Addresses(ops, final); !a.Ok || a.Acks != 39 || a.Reads != 3 || a.Watches != 1 || a.Heads != 1 {
		t.Errorf("addresses: %s", a.Summary())
	}
	if l := Linearizable(ops, Options{Others: map[string][]uint64{"ses_recovered": j.Others()}}); !l.Ok() {
		t.Errorf("linearizable: %s", l.Summary())
	}

	// What the old checkers did: compare against the values alone. The
	// same history then shows "moved" writes (the false alarm of issue 12).
	if d := Durable(ops, journals(map[string][]string{"ses_recovered": j.Values()})); d.Ok || d.Violations[0].Kind != MovedWrite {
		t.Errorf("a values-only final journal should read as moved writes: %s", d.Summary())
	}
	// The model without the fleet's events cannot explain the jump either.
	if l := Linearizable(ops, Options{}); l.Ok() {
		t.Error("linearizable without the fleet's events should fail")
	}
}

// The checkers still catch the loss the issue feared: had the move's events
// vanished and the later values slid down six places, every observed
// address after 35 would name another event.
func TestLostFleetEventsAreCaught(t *testing.T) {
	ops, j := recoveredSession()
	var slid Journal
	for _, e := range j.Events {
		if e.Value {
			e.Seq = slid.Len() + 1
			slid.Events = append(slid.Events, e)
		}
	}
	final := map[string]Journal{"ses_recovered": slid}
	if d := Durable(ops, final); d.Ok {
		t.Error("durable missed values at other seqs")
	}
	a := Addresses(ops, final)
	if a.Ok {
		t.Fatal("addresses missed the lost events")
	}
	kinds := map[ViolationKind]int{}
	for _, v := range a.Violations {
		kinds[v.Kind]++
	}
	// The journal is six events shorter: the 4 acks after the move, the
	// mismatch head 41, the two reads and the watch that saw it all point
	// past its end.
	if kinds[AddressGone] != 8 || len(a.Violations) != 8 {
		t.Errorf("violations %v:\n%s", kinds, a.Summary())
	}
	if l := Linearizable(ops, Options{Others: map[string][]uint64{"ses_recovered": slid.Others()}}); l.Ok() {
		t.Error("linearizable missed the lost events")
	}
}

// A fleet event that changes identity (same seq, another kind or text) is
// caught through the digests reads and watches recorded.
func TestChangedFleetEventIsCaught(t *testing.T) {
	ops, j := recoveredSession()
	j.Events[37].Text = "something else"
	a := Addresses(ops, map[string]Journal{"ses_recovered": j})
	if a.Ok || a.Violations[0].Kind != AddressChanged {
		t.Fatalf("want address-changed: %s", a.Summary())
	}
}
