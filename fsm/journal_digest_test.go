package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// pagedDigest is the journal digest as the runner computed it before
// FSM.JournalDigest: every event 1..upTo read into memory a page of 1000
// at a time, then JournalDigest.
func pagedDigest(t *testing.T, f *FSM, id string, upTo uint64) string {
	t.Helper()
	var evs []*fsmpb.Event
	for from := uint64(1); from <= upTo; {
		page, _, err := f.Events(id, from, int(min(upTo-from+1, 1000)))
		if err != nil {
			t.Fatalf("Events(%s, %d): %v", id, from, err)
		}
		if len(page) == 0 {
			break
		}
		evs = append(evs, page...)
		from = page[len(page)-1].Seq + 1
	}
	if uint64(len(evs)) != upTo {
		t.Fatalf("%s holds %d of %d events", id, len(evs), upTo)
	}
	return JournalDigest(evs)
}

// TestFSMJournalDigest: the streaming digest equals JournalDigest over the
// same events read into memory, for every kind of address: 0, the first
// and last event of a chunk, the middle of one, past the 1000 events of
// one page of reads, the head; of a session whose keys sort between other
// sessions' keys; after the session stopped.
func TestFSMJournalDigest(t *testing.T) {
	h := newHarness(t)
	many := func(n int, tag string) []*fsmpb.EventInput {
		evs := make([]*fsmpb.EventInput, n)
		for i := range evs {
			evs[i] = ev(KindNote, fmt.Sprintf("%s %d", tag, i))
			if i%3 == 0 {
				evs[i].Data = []byte(fmt.Sprintf(`{"i":%d}`, i))
			}
		}
		return evs
	}
	// Chunks of s: 1-2 (created), 3, 4-6, 7-1006, 1007-1011, then the stop
	// (1012). r and s1 have keys on either side of s's.
	for _, id := range []string{"r", "s", "s1"} {
		wantErr(t, h.apply1(create(id)), "")
	}
	for _, n := range []int{1, 3, MaxEventsPerAppend, 5} {
		wantErr(t, h.apply1(appendEv("s", many(n, "s")...)), "")
		wantErr(t, h.apply1(appendEv("r", many(2, "r")...)), "")
		wantErr(t, h.apply1(appendEv("s1", many(2, "s1")...)), "")
	}
	check := func(id string, upTo uint64) {
		t.Helper()
		got, err := h.f.JournalDigest(id, upTo)
		if err != nil {
			t.Fatalf("JournalDigest(%s, %d): %v", id, upTo, err)
		}
		if want := pagedDigest(t, h.f, id, upTo); got != want {
			t.Errorf("JournalDigest(%s, %d) = %s; over the events in memory %s", id, upTo, got, want)
		}
	}
	head := h.session("s").HeadSeq
	if head != 1011 {
		t.Fatalf("head of s %d, want 1011", head)
	}
	for _, upTo := range []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 500, 999, 1000, 1001, 1005, 1006, 1007, 1009, 1010, 1011} {
		check("s", upTo)
	}
	for upTo := range h.session("r").HeadSeq + 1 {
		check("r", upTo)
		check("s1", upTo)
	}
	if empty, _ := h.f.JournalDigest("s", 0); empty != hex.EncodeToString(sha256.New().Sum(nil)) {
		t.Errorf("digest of no events %s", empty)
	}
	wantErr(t, h.apply1(stop("s", "done")), "")
	check("s", 1011)
	check("s", 1012)

	// Refusals: past the head (the replica lacks events), an unknown
	// session, an invalid id.
	if _, err := h.f.JournalDigest("s", 1013); err == nil || ReasonOf(err) != "" ||
		!strings.Contains(err.Error(), "holds 1012 of the 1013 events") {
		t.Errorf("past the head: %v", err)
	}
	if _, err := h.f.JournalDigest("nope", 1); ReasonOf(err) != ReasonNotFound {
		t.Errorf("unknown session: %v, want NOT_FOUND", err)
	}
	if _, err := h.f.JournalDigest("nope", 0); ReasonOf(err) != ReasonNotFound {
		t.Errorf("unknown session, no events: %v, want NOT_FOUND", err)
	}
	if _, err := h.f.JournalDigest("", 1); ReasonOf(err) != ReasonInvalidArgument {
		t.Errorf("no session id: %v, want INVALID_ARGUMENT", err)
	}
}
