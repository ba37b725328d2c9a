package checker

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Event is one journal event as a client observed it. Seq is its address
// relative to the session's opening events (the first event after them is
// seq 1), the numbering every history op uses. Value marks an event the
// workload appended: Text is then its value. Every other event was written
// by the fleet itself — a recovery move's move.* and epoch.changed events,
// for instance — and is part of the journal all the same: it takes an
// address, and later appends come after it.
type Event struct {
	Seq   uint64 `json:"seq"`
	Kind  string `json:"kind"`
	Text  string `json:"text,omitempty"`
	Value bool   `json:"value,omitempty"`
}

// Journal is one session's journal as read after the run: Events[i] holds
// seq i+1.
type Journal struct {
	Events []Event `json:"events"`
}

// Len is the head seq.
func (j Journal) Len() uint64 { return uint64(len(j.Events)) }

// At returns the event at seq.
func (j Journal) At(seq uint64) (Event, bool) {
	if seq == 0 || seq > j.Len() {
		return Event{}, false
	}
	return j.Events[seq-1], true
}

// Values returns the workload's values in seq order.
func (j Journal) Values() []string {
	out := make([]string, 0, len(j.Events))
	for _, e := range j.Events {
		if e.Value {
			out = append(out, e.Text)
		}
	}
	return out
}

// Others returns the seqs of the events the fleet wrote itself.
func (j Journal) Others() []uint64 {
	var out []uint64
	for _, e := range j.Events {
		if !e.Value {
			out = append(out, e.Seq)
		}
	}
	return out
}

// ValueJournal is a journal of workload values only, at seqs 1..n.
func ValueJournal(values ...string) Journal {
	j := Journal{Events: make([]Event, len(values))}
	for i, v := range values {
		j.Events[i] = Event{Seq: uint64(i) + 1, Kind: "note", Text: v, Value: true}
	}
	return j
}

// RangeDigest is the identity of a run of consecutive events: SHA-256 over
// each event's seq, kind and text, length-prefixed, hex. A client that
// observed events records their digest; the address checker recomputes it
// over the same seqs of the final journal.
func RangeDigest(events []Event) string {
	h := sha256.New()
	var n [8]byte
	put := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	for _, e := range events {
		binary.BigEndian.PutUint64(n[:], e.Seq)
		h.Write(n[:])
		put(e.Kind)
		put(e.Text)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Range returns the events at seqs from..to (inclusive), or false if the
// journal does not reach to.
func (j Journal) Range(from, to uint64) ([]Event, bool) {
	if from == 0 || to > j.Len() || from > to+1 {
		return nil, false
	}
	return j.Events[from-1 : to], true
}
