package fsm

import (
	"fmt"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

func TestRequestIDReturnsOriginalResult(t *testing.T) {
	// Each case applies `first` with request id "r", then `retry` with the
	// same request id in a later entry. The retry must return exactly the
	// first result and change nothing, whatever its body says.
	tests := []struct {
		name      string
		first     *fsmpb.Command
		retry     *fsmpb.Command
		wantFirst Reason
	}{
		{"create, same body", create("new"), create("new"), ""},
		{"create, other body", create("new"), create("other"), ""},
		{"append, same body", appendEv("s1", ev("note", "once")), appendEv("s1", ev("note", "once")), ""},
		{"append, other session", appendEv("s1", ev("note", "once")), appendEv("s2", ev("note", "x")), ""},
		{"append, other command type", appendEv("s1", ev("note", "once")), stop("s1", ""), ""},
		{"stop", stop("s1", "DONE"), stop("s1", "OTHER"), ""},
		{"error: not found stays not found", appendEv("later", ev("note", "x")), appendEv("later", ev("note", "x")), ReasonNotFound},
		{"error: seq mismatch keeps its head", appendIf("s1", 7, ev("note", "x")), appendIf("s1", 2, ev("note", "x")), ReasonSeqMismatch},
		{"error: invalid stays invalid", appendEv("s1", ev("bogus", "x")), appendEv("s1", ev("note", "fixed")), ReasonInvalidArgument},
		{"error: runner kind stays invalid", appendEv("s1", ev(KindOutput, "x")), appendEv("s1", ev("note", "fixed")), ReasonInvalidArgument},
		{"error: already exists", create("s1"), create("fresh"), ReasonAlreadyExists},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply(create("s1"), create("s2"))

			first := h.apply1(req("r", tt.first))
			wantErr(t, first, tt.wantFirst)

			// Make the retry's body applicable if it were applied anew:
			// e.g. the session missing the first time now exists.
			h.apply1(create("later"))
			before := h.state()

			for i := range 3 {
				retry := h.apply1(req("r", proto.Clone(tt.retry).(*fsmpb.Command)))
				if !proto.Equal(retry, first) {
					t.Fatalf("retry %d: result %v, want the original %v", i, retry, first)
				}
			}
			if after := h.state(); after != before {
				t.Fatalf("retry changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func TestRequestIDWithinOneEntry(t *testing.T) {
	h := newHarness(t)
	h.apply1(create("s1"))
	rs := h.apply(
		req("r", appendEv("s1", ev("note", "a"))),
		req("r", appendEv("s1", ev("note", "b"))),
	)
	if !proto.Equal(rs[0], rs[1]) || !proto.Equal(rs[0], appendResult("s1", 3, 3)) {
		t.Fatalf("results %v, %v; want both %v", rs[0], rs[1], appendResult("s1", 3, 3))
	}
	h.wantJournal("s1", withJournal("s1", "3 note a")...)
}

func TestNoRequestIDIsNotDeduplicated(t *testing.T) {
	h := newHarness(t)
	h.apply1(create("s1"))
	c := appendEv("s1", ev("note", "again"))
	r1 := h.apply1(proto.Clone(c).(*fsmpb.Command))
	r2 := h.apply1(proto.Clone(c).(*fsmpb.Command))
	if !proto.Equal(r1, appendResult("s1", 3, 3)) || !proto.Equal(r2, appendResult("s1", 4, 4)) {
		t.Fatalf("results %v, %v; want seqs 3 and 4", r1, r2)
	}
	h.wantJournal("s1", withJournal("s1", "3 note again", "4 note again")...)
}

func TestRequestIDsAreGlobal(t *testing.T) {
	// A request id is not scoped to a session: reusing it for another
	// session returns the first result.
	h := newHarness(t)
	h.apply(create("a"), create("b"))
	r1 := h.apply1(req("r", appendEv("a", ev("note", "x"))))
	r2 := h.apply1(req("r", appendEv("b", ev("note", "y"))))
	if !proto.Equal(r1, r2) {
		t.Fatalf("second use of request id: %v, want %v", r2, r1)
	}
	h.wantJournal("b", createdJournal("b")...)
}

func TestDedupWindow(t *testing.T) {
	// "r" is first applied at t0. A retry is deduplicated while the
	// leader-stamped time is within t0+DedupWindow and applied anew once a
	// command stamped later than that has been seen.
	tests := []struct {
		name    string
		entries [][]*fsmpb.Command // after the original, before the retry
		retryAt int64
		// sameEntry puts the retry in one entry after a command stamped
		// retryAt.
		sameEntry bool
		anew      bool
	}{
		{
			name:    "retry inside the window",
			retryAt: t0 + DedupWindow/2,
		},
		{
			name:    "retry exactly at the window edge",
			retryAt: t0 + DedupWindow,
		},
		{
			name:    "retry after the window",
			retryAt: t0 + DedupWindow + 1,
			anew:    true,
		},
		{
			name:    "window passed by an earlier command",
			entries: [][]*fsmpb.Command{{at(t0+DedupWindow+1, appendEv("s1", ev("note", "tick")))}},
			retryAt: t0 + DedupWindow + 2,
			anew:    true,
		},
		{
			name:      "window passed by an earlier command in the same entry",
			retryAt:   t0 + DedupWindow + 1,
			sameEntry: true,
			anew:      true,
		},
		{
			name:    "old retry after a clock jump still finds nothing",
			entries: [][]*fsmpb.Command{{at(t0+2*DedupWindow, appendEv("s1", ev("note", "tick")))}},
			retryAt: t0 + 1, // a stale leader clock
			anew:    true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply1(at(t0-1, create("s1")))
			orig := h.apply1(at(t0, req("r", appendEv("s1", ev("note", "original")))))
			wantErr(t, orig, "")
			for _, e := range tt.entries {
				h.apply(e...)
			}
			var retry *fsmpb.Result
			if tt.sameEntry {
				rs := h.apply(
					at(tt.retryAt, appendEv("s1", ev("note", "tick"))),
					at(tt.retryAt, req("r", appendEv("s1", ev("note", "retry")))),
				)
				retry = rs[1]
			} else {
				retry = h.apply1(at(tt.retryAt, req("r", appendEv("s1", ev("note", "retry")))))
			}
			if !tt.anew {
				if !proto.Equal(retry, orig) {
					t.Fatalf("retry = %v, want the original %v", retry, orig)
				}
				if j := h.journal("s1"); j[len(j)-1] != "3 note original" {
					t.Fatalf("retry appended: %q", j)
				}
				return
			}
			if proto.Equal(retry, orig) {
				t.Fatalf("retry returned the original result %v; want it applied anew", retry)
			}
			wantErr(t, retry, "")
			j := h.journal("s1")
			if last := j[len(j)-1]; !strings.HasSuffix(last, " note retry") {
				t.Fatalf("journal does not end with the retry: %q", j)
			}
			// Once applied anew, the request id is remembered again.
			again := h.apply1(at(tt.retryAt, req("r", appendEv("s1", ev("note", "third")))))
			if !proto.Equal(again, retry) {
				t.Fatalf("third attempt = %v, want the second result %v", again, retry)
			}
		})
	}
}

func TestDedupPruningIsBounded(t *testing.T) {
	// More request ids expire at once than one entry may prune; they are
	// forgotten over the following entries, oldest first, and none is
	// remembered forever.
	h := newHarness(t)
	h.apply1(at(t0, create("s1")))
	const n = 3*maxPrunePerEntry/2 + 7
	var cmds []*fsmpb.Command
	for i := range n {
		cmds = append(cmds, at(t0+int64(i), req(reqID(i), appendEv("s1", ev("note", "")))))
	}
	h.apply(cmds...)
	if got := h.remembered(); got != n {
		t.Fatalf("remembered %d request ids, want %d", got, n)
	}
	late := t0 + DedupWindow + int64(n) + 1
	h.apply1(at(late, appendEv("s1", ev("note", "tick"))))
	if got := h.remembered(); got != n-maxPrunePerEntry {
		t.Fatalf("after one entry: remembered %d, want %d", got, n-maxPrunePerEntry)
	}
	h.apply1(at(late, appendEv("s1", ev("note", "tick"))))
	if got := h.remembered(); got != 0 {
		t.Fatalf("after two entries: remembered %d, want 0", got)
	}
}

func reqID(i int) string { return fmt.Sprintf("req-%04d", i) }

// remembered counts the request ids in the dedup table, checking that the
// table and its expiry index agree.
func (h *harness) remembered() int {
	h.t.Helper()
	var nreq, nexp int
	_ = h.f.view(func(tx *bolt.Tx) error {
		nreq = tx.Bucket(bucketRequests).Stats().KeyN
		nexp = tx.Bucket(bucketExpiry).Stats().KeyN
		return nil
	})
	if nreq != nexp {
		h.t.Fatalf("dedup table has %d request ids, expiry index %d", nreq, nexp)
	}
	return nreq
}

func TestRequestIDTooLong(t *testing.T) {
	// A request id is client-supplied; one longer than the limit is refused
	// like any other invalid input rather than crashing every replica on a
	// bbolt key-size error.
	for _, n := range []int{MaxRequestIDBytes + 1, 40000} {
		h := newHarness(t)
		h.apply1(create("s1"))
		before := h.state()
		r := h.apply1(req(strings.Repeat("r", n), appendEv("s1", ev("note", "x"))))
		wantErr(t, r, ReasonInvalidArgument)
		if after := h.state(); after != before {
			t.Fatalf("len %d: refused command changed the state", n)
		}
	}
	h := newHarness(t)
	h.apply1(create("s1"))
	long := strings.Repeat("r", MaxRequestIDBytes)
	first := h.apply1(req(long, appendEv("s1", ev("note", "x"))))
	wantErr(t, first, "")
	if again := h.apply1(req(long, appendEv("s1", ev("note", "x")))); !proto.Equal(again, first) {
		t.Fatalf("request id at the limit not deduplicated: %v", again)
	}
}
