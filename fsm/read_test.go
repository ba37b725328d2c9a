package fsm

import (
	"fmt"
	"slices"
	"testing"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

func TestEventsPaging(t *testing.T) {
	h := newHarness(t)
	h.apply(create("s1"), create("s10"), create("s2"))
	for i := 3; i <= 10; i++ { // after session.created and epoch.changed
		h.apply(appendEv("s1", ev("note", fmt.Sprint(i))), appendEv("s10", ev("note", "other")))
	}
	tests := []struct {
		from     uint64
		limit    int
		wantSeqs []uint64
	}{
		{0, 100, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}, // 0 means from the start
		{1, 3, []uint64{1, 2, 3}},
		{4, 3, []uint64{4, 5, 6}},
		{9, 3, []uint64{9, 10}},
		{10, 1, []uint64{10}},
		{11, 5, nil}, // past the head: empty, not an error
		{1 << 62, 5, nil},
		{3, 0, nil},
	}
	for _, tt := range tests {
		evs, head, err := h.f.Events("s1", tt.from, tt.limit)
		if err != nil {
			t.Fatalf("Events(s1, %d, %d): %v", tt.from, tt.limit, err)
		}
		if head != 10 {
			t.Fatalf("Events(s1, %d, %d): head %d, want 10", tt.from, tt.limit, head)
		}
		var seqs []uint64
		for _, e := range evs {
			if e.SessionId != "s1" {
				t.Fatalf("Events(s1) returned an event of %s", e.SessionId)
			}
			seqs = append(seqs, e.Seq)
		}
		if !slices.Equal(seqs, tt.wantSeqs) {
			t.Fatalf("Events(s1, %d, %d) seqs = %v, want %v", tt.from, tt.limit, seqs, tt.wantSeqs)
		}
	}

	// A session whose id is a prefix of another's sees only its own events.
	if evs, head, _ := h.f.Events("s2", 1, 100); len(evs) != 2 || head != 2 {
		t.Fatalf("Events(s2) = %d events, head %d; want 2, 2", len(evs), head)
	}
}

func TestEventsErrors(t *testing.T) {
	h := newHarness(t)
	h.apply1(create("s1"))
	for _, tt := range []struct {
		id   string
		want Reason
	}{
		{"nope", ReasonNotFound},
		{"s", ReasonNotFound},
		{"", ReasonInvalidArgument},
		{"s1\x00", ReasonInvalidArgument},
	} {
		evs, _, err := h.f.Events(tt.id, 1, 10)
		if ReasonOf(err) != tt.want || evs != nil {
			t.Fatalf("Events(%q) = %v, %v; want reason %s", tt.id, evs, err, tt.want)
		}
	}
	if _, err := h.f.Session("nope"); ReasonOf(err) != ReasonNotFound {
		t.Fatalf("Session(nope) err = %v, want NOT_FOUND", err)
	}
}

func TestSessionsPaging(t *testing.T) {
	h := newHarness(t)
	// Created out of order; listed by id.
	for _, id := range []string{"d", "b", "e", "a", "c"} {
		h.apply1(create(id))
	}
	tests := []struct {
		after    string
		limit    int
		wantIDs  []string
		wantMore bool
	}{
		{"", 10, []string{"a", "b", "c", "d", "e"}, false},
		{"", 5, []string{"a", "b", "c", "d", "e"}, false}, // exactly all: no more
		{"", 2, []string{"a", "b"}, true},
		{"b", 2, []string{"c", "d"}, true},
		{"d", 2, []string{"e"}, false},
		{"e", 2, nil, false},
		{"bb", 2, []string{"c", "d"}, true}, // after an id that does not exist
		{"0", 1, []string{"a"}, true},
		{"z", 3, nil, false},
	}
	for _, tt := range tests {
		ss, more, err := h.f.Sessions(tt.after, tt.limit)
		if err != nil {
			t.Fatalf("Sessions(%q, %d): %v", tt.after, tt.limit, err)
		}
		if ids := sessionIDs(ss); !slices.Equal(ids, tt.wantIDs) || more != tt.wantMore {
			t.Fatalf("Sessions(%q, %d) = %v more=%v, want %v more=%v", tt.after, tt.limit, ids, more, tt.wantIDs, tt.wantMore)
		}
	}

	// Walking page by page visits every session exactly once.
	var all []string
	for after, pages := "", 0; ; pages++ {
		ss, more, err := h.f.Sessions(after, 2)
		if err != nil || pages > 5 {
			t.Fatalf("paging: err %v after %d pages", err, pages)
		}
		all = append(all, sessionIDs(ss)...)
		if !more {
			break
		}
		after = ss[len(ss)-1].SessionId
	}
	if !slices.Equal(all, []string{"a", "b", "c", "d", "e"}) {
		t.Fatalf("paged through %v", all)
	}
}

func sessionIDs(ss []*fsmpb.Session) []string {
	var ids []string
	for _, s := range ss {
		ids = append(ids, s.SessionId)
	}
	return ids
}

// Events appended by one command are stored together; reads that start or
// stop inside such a group return exactly the requested addresses.
func TestEventsPagingInsideBatchedAppends(t *testing.T) {
	h := newHarness(t)
	h.apply(create("a"), create("ab"))
	// a: [1 2] [3 4 5 6] [7 8 9]; ab: [1 2] [3 4]
	h.apply(appendEv("a", ev("note", "3"), ev("note", "4"), ev("note", "5"), ev("note", "6")))
	h.apply(appendEv("ab", ev("note", "x"), ev("note", "y")))
	h.apply(appendEv("a", ev("note", "7"), ev("note", "8"), ev("note", "9")))
	tests := []struct {
		from     uint64
		limit    int
		wantSeqs []uint64
	}{
		{1, 100, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{2, 1, []uint64{2}},
		{2, 2, []uint64{2, 3}},
		{4, 2, []uint64{4, 5}},
		{5, 3, []uint64{5, 6, 7}},
		{8, 10, []uint64{8, 9}},
		{9, 10, []uint64{9}},
		{10, 10, nil},
	}
	for _, tt := range tests {
		evs, _, err := h.f.Events("a", tt.from, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		for _, e := range evs {
			if e.SessionId != "a" {
				t.Fatalf("Events(a) returned an event of %s", e.SessionId)
			}
			seqs = append(seqs, e.Seq)
		}
		if fmt.Sprint(seqs) != fmt.Sprint(tt.wantSeqs) {
			t.Fatalf("Events(a, %d, %d) = %v, want %v", tt.from, tt.limit, seqs, tt.wantSeqs)
		}
	}
	if evs, _, _ := h.f.Events("ab", 3, 10); len(evs) != 2 || evs[0].Text != "x" || evs[1].Seq != 4 {
		t.Fatalf("Events(ab, 3) = %v", evs)
	}
}
