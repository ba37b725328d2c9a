package fsm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// leaseHarness creates s1 at t0 with attachments (30s ttl, renewed by
// nothing) stamped t0.
func leaseHarness(t *testing.T, attachments ...string) *harness {
	t.Helper()
	h := newHarness(t)
	h.apply1(at(t0, create("s1")))
	var cmds []*fsmpb.Command
	for _, a := range attachments {
		cmds = append(cmds, at(t0, attachCmd("s1", a, "terminal", "tty-"+a, MaxTTL)))
	}
	for _, r := range h.apply(cmds...) {
		wantErr(t, r, "")
	}
	return h
}

func countKind(h *harness, id, kind string) int {
	n := 0
	for _, line := range h.journal(id) {
		if strings.Fields(line)[1] == kind {
			n++
		}
	}
	return n
}

func TestLeaseIsExclusive(t *testing.T) {
	// 20 clients race for the lease. However the commands reach the log
	// (one entry, or one entry each in one ApplyBatch), the first wins and
	// every other is told who holds it.
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = fmt.Sprintf("a%02d", i)
	}
	takes := func() []*fsmpb.Command {
		var cmds []*fsmpb.Command
		for i, a := range ids {
			cmds = append(cmds, at(t0+sec+int64(i), takeLease("s1", a, false, 30*sec)))
		}
		return cmds
	}
	for _, mode := range []string{"one entry", "one batch of entries"} {
		t.Run(mode, func(t *testing.T) {
			h := leaseHarness(t, ids...)
			var rs []*fsmpb.Result
			if mode == "one entry" {
				rs = h.apply(takes()...)
			} else {
				var logs []*raft.Log
				for _, c := range takes() {
					logs = append(logs, h.entry(c))
				}
				for _, out := range h.f.ApplyBatch(logs) {
					rs = append(rs, results(t, out)...)
				}
			}
			holders, held := 0, 0
			for i, r := range rs {
				if r.Error == nil {
					holders++
					if i != 0 {
						t.Fatalf("take %d won, want the first", i)
					}
					continue
				}
				wantErrMsg(t, r, ReasonLeaseHeld, "terminal tty-a00 (attachment a00)", "steal")
				held++
			}
			if holders != 1 || held != 19 {
				t.Fatalf("%d holders, %d LEASE_HELD; want 1 and 19", holders, held)
			}
			s := h.session("s1")
			if LeaseHolder(s, t0+2*sec) != "a00" || s.Lease.ExpiresUnixNano != t0+31*sec || s.Lease.TakenUnixNano != t0+sec {
				t.Fatalf("lease = %v", s.Lease)
			}
			if n := countKind(h, "s1", KindLeaseTaken); n != 1 {
				t.Fatalf("%d lease.taken events, want 1", n)
			}
			d := h.eventData("s1", s.HeadSeq)
			if d["attachment_id"] != "a00" || d["stolen_from"] != nil || d["expires_unix_nano"] != num(t0+31*sec) {
				t.Fatalf("lease.taken data = %v", d)
			}
		})
	}
}

func TestLeaseExpiresByCommandTime(t *testing.T) {
	h := leaseHarness(t, "a1", "a2")
	wantErr(t, h.apply1(at(t0, takeLease("s1", "a1", false, 10*sec))), "") // until t0+10s

	h.refused(at(t0+10*sec-1, takeLease("s1", "a2", false, 10*sec)), ReasonLeaseHeld)
	s := h.session("s1")
	if LeaseHolder(s, t0+10*sec-1) != "a1" || LeaseHolder(s, t0+10*sec) != "" {
		t.Fatalf("LeaseHolder around expiry: %q, %q", LeaseHolder(s, t0+10*sec-1), LeaseHolder(s, t0+10*sec))
	}

	// Nobody released it, but at the expiry time it is free: no steal
	// needed, and nothing was stolen.
	r := h.apply1(at(t0+10*sec, takeLease("s1", "a2", false, 10*sec)))
	wantErr(t, r, "")
	if r.NoOp || LeaseHolder(r.GetSession(), t0+10*sec) != "a2" {
		t.Fatalf("take after expiry: %v", r)
	}
	if d := h.eventData("s1", h.session("s1").HeadSeq); d["attachment_id"] != "a2" || d["stolen_from"] != nil {
		t.Fatalf("lease.taken data = %v", d)
	}
	if n := countKind(h, "s1", KindLeaseReleased); n != 0 {
		t.Fatalf("%d lease.released events; expiry writes none", n)
	}
}

func TestLeaseSteal(t *testing.T) {
	h := leaseHarness(t, "a1", "a2")
	wantErr(t, h.apply1(at(t0, takeLease("s1", "a1", false, 60*sec))), "")
	r := h.apply1(at(t0+sec, takeLease("s1", "a2", true, 60*sec)))
	wantErr(t, r, "")
	if LeaseHolder(r.GetSession(), t0+sec) != "a2" {
		t.Fatalf("holder after steal: %v", r.GetSession().GetLease())
	}
	head := h.session("s1").HeadSeq
	want := fmt.Sprintf("%d lease.taken lease stolen from terminal tty-a1 (attachment a1) by terminal tty-a2", head)
	if j := h.journal("s1"); j[len(j)-1] != want {
		t.Fatalf("last event %q, want %q", j[len(j)-1], want)
	}
	if d := h.eventData("s1", head); d["attachment_id"] != "a2" || d["stolen_from"] != "a1" || d["stolen_from_name"] != "terminal tty-a1" {
		t.Fatalf("steal data = %v", d)
	}
	// The robbed client finds out on its next renewal.
	wantErrMsg(t, h.refused(at(t0+2*sec, renewLease("s1", "a1", 60*sec)), ReasonLeaseNotHeld), ReasonLeaseNotHeld, "attachment a2")

	// Stealing a free lease is just taking it.
	h2 := leaseHarness(t, "a1")
	wantErr(t, h2.apply1(takeLease("s1", "a1", true, 60*sec)), "")
	if d := h2.eventData("s1", h2.session("s1").HeadSeq); d["stolen_from"] != nil {
		t.Fatalf("steal of a free lease names a victim: %v", d)
	}
}

func TestLeaseTakeByHolderRenews(t *testing.T) {
	h := leaseHarness(t, "a1")
	wantErr(t, h.apply1(at(t0, takeLease("s1", "a1", false, 10*sec))), "")
	head := h.session("s1").HeadSeq
	// (The result is flagged no_op although the expiry moves; only the
	// absence of an event and the new expiry are asserted.)
	r := h.apply1(at(t0+5*sec, takeLease("s1", "a1", false, 10*sec)))
	if r.Error != nil || LeaseHolder(r.GetSession(), t0+5*sec) != "a1" {
		t.Fatalf("re-take by the holder: %v", r)
	}
	s := h.session("s1")
	if s.HeadSeq != head || s.Lease.ExpiresUnixNano != t0+15*sec || s.Lease.TakenUnixNano != t0 {
		t.Fatalf("after re-take: head %d lease %v", s.HeadSeq, s.Lease)
	}
}

func TestRenewLease(t *testing.T) {
	h := leaseHarness(t, "a1", "a2")
	wantErr(t, h.apply1(at(t0, takeLease("s1", "a1", false, 10*sec))), "")
	head := h.session("s1").HeadSeq

	r := h.apply1(at(t0+5*sec, renewLease("s1", "a1", 20*sec)))
	wantErr(t, r, "")
	if s := h.session("s1"); s.Lease.ExpiresUnixNano != t0+25*sec || s.HeadSeq != head {
		t.Fatalf("after renewal: lease %v head %d (a renewal writes no event)", s.Lease, s.HeadSeq)
	}

	wantErrMsg(t, h.refused(at(t0+6*sec, renewLease("s1", "a2", 20*sec)), ReasonLeaseNotHeld),
		ReasonLeaseNotHeld, "attachment a2 does not hold the input lease", "tty-a1 (attachment a1)")
	h.refuseAll(t, []refusal{
		{"unknown attachment", at(t0+6*sec, renewLease("s1", "ghost", 20*sec)), ReasonLeaseNotHeld},
		{"empty attachment id", at(t0+6*sec, renewLease("s1", "", 20*sec)), ReasonInvalidArgument},
		{"ttl over 10m", at(t0+6*sec, renewLease("s1", "a1", MaxTTL+1)), ReasonInvalidArgument},
		{"unknown session", at(t0+6*sec, renewLease("nope", "a1", 20*sec)), ReasonNotFound},
	})

	// Too late: the lease lapsed at t0+25s; renewing cannot revive it.
	wantErrMsg(t, h.refused(at(t0+25*sec, renewLease("s1", "a1", 20*sec)), ReasonLeaseNotHeld),
		ReasonLeaseNotHeld, "nobody does")
}

func TestReleaseLease(t *testing.T) {
	h := leaseHarness(t, "a1", "a2")
	wantErr(t, h.apply1(at(t0, takeLease("s1", "a1", false, 10*sec))), "")

	// Only the holder can release; anyone else's release changes nothing.
	before := h.state()
	wantNoOp(t, h.apply1(at(t0+sec, releaseLease("s1", "a2", ""))))
	wantNoOp(t, h.apply1(at(t0+sec, releaseLease("s1", "ghost", ""))))
	if h.state() != before {
		t.Fatal("a release by a non-holder changed the state")
	}

	r := h.apply1(at(t0+2*sec, releaseLease("s1", "a1", "")))
	wantErr(t, r, "")
	if r.NoOp || r.GetSession().GetLease() != nil {
		t.Fatalf("release result %v", r)
	}
	head := h.session("s1").HeadSeq
	want := fmt.Sprintf("%d lease.released lease released by terminal tty-a1: released", head)
	if j := h.journal("s1"); j[len(j)-1] != want {
		t.Fatalf("last event %q, want %q", j[len(j)-1], want)
	}
	if d := h.eventData("s1", head); d["attachment_id"] != "a1" || d["reason"] != "released" {
		t.Fatalf("released data = %v", d)
	}

	// Releasing again: nothing to release.
	before = h.state()
	wantNoOp(t, h.apply1(at(t0+3*sec, releaseLease("s1", "a1", ""))))
	if h.state() != before {
		t.Fatal("a second release changed the state")
	}
	// The lease is free for anyone now.
	wantErr(t, h.apply1(at(t0+3*sec, takeLease("s1", "a2", false, 10*sec))), "")
	h.refused(releaseLease("s1", "a2", strings.Repeat("r", MaxReasonBytes+1)), ReasonInvalidArgument)
}

func TestReleaseLeaseByReaper(t *testing.T) {
	h := leaseHarness(t, "a1")
	wantErr(t, h.apply1(at(t0, takeLease("s1", "a1", false, 10*sec))), "") // until t0+10s

	// Before expiry the reaper's release is a no-op, and so is a release
	// naming nobody for any other reason.
	before := h.state()
	for _, c := range []*fsmpb.Command{
		at(t0+sec, releaseLease("s1", "", LeaseExpired)),
		at(t0+10*sec-1, releaseLease("s1", "", LeaseExpired)),
		at(t0+20*sec, releaseLease("s1", "", "")),
		at(t0+20*sec, releaseLease("s1", "", "whatever")),
	} {
		wantNoOp(t, h.apply1(c))
	}
	if h.state() != before {
		t.Fatal("a no-op reaper release changed the state")
	}

	r := h.apply1(at(t0+20*sec, releaseLease("s1", "", LeaseExpired)))
	wantErr(t, r, "")
	if r.NoOp {
		t.Fatalf("reaper release after expiry is a no-op: %v", r)
	}
	s := h.session("s1")
	if s.Lease != nil {
		t.Fatalf("lease after reaping: %v", s.Lease)
	}
	if j := h.journal("s1"); j[len(j)-1] != fmt.Sprintf("%d lease.released lease released by terminal tty-a1: expired", s.HeadSeq) {
		t.Fatalf("last event %q", j[len(j)-1])
	}
	if d := h.eventData("s1", s.HeadSeq); d["attachment_id"] != "a1" || d["reason"] != LeaseExpired {
		t.Fatalf("reaped data = %v", d)
	}
	// Reaping again finds nothing.
	wantNoOp(t, h.apply1(at(t0+21*sec, releaseLease("s1", "", LeaseExpired))))
}

func TestTakeLeaseErrors(t *testing.T) {
	h := leaseHarness(t, "a1")
	h.apply(create("stopped"), attachT("stopped", "a1"), stop("stopped", ""))
	h.refuseAll(t, []refusal{
		{"unknown attachment", takeLease("s1", "ghost", false, 10*sec), ReasonAttachmentNotFound},
		{"empty attachment id", takeLease("s1", "", false, 10*sec), ReasonInvalidArgument},
		{"unknown session", takeLease("nope", "a1", false, 10*sec), ReasonNotFound},
		{"stopped session", takeLease("stopped", "a1", true, 10*sec), ReasonSessionStopped},
		{"ttl under 1s", takeLease("s1", "a1", false, MinTTL-1), ReasonInvalidArgument},
		{"ttl over 10m", takeLease("s1", "a1", false, MaxTTL+1), ReasonInvalidArgument},
	})
	// A detached client cannot take the lease.
	wantErr(t, h.apply1(detach("s1", "a1", "")), "")
	h.refused(takeLease("s1", "a1", false, 10*sec), ReasonAttachmentNotFound)
}
