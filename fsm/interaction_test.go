package fsm

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// interactive creates session id at t0 with two attachments: a1, a terminal
// holding the input lease, and a2, a phone without it (both for 10 min).
// The journal head is then 5.
func interactive(t *testing.T, h *harness, id string) {
	t.Helper()
	rs := h.apply(
		at(t0, create(id)),
		at(t0, attachCmd(id, "a1", "terminal", "tty-a1", MaxTTL)),
		at(t0, attachCmd(id, "a2", "browser", "phone", MaxTTL)),
		at(t0, takeLease(id, "a1", false, MaxTTL)),
	)
	for _, r := range rs {
		wantErr(t, r, "")
	}
	if s := h.session(id); s.HeadSeq != 5 || LeaseHolder(s, t0) != "a1" {
		t.Fatalf("interactive(%s): head %d holder %q", id, s.HeadSeq, LeaseHolder(s, t0))
	}
}

func TestSubmitInput(t *testing.T) {
	h := newHarness(t)
	interactive(t, h, "s1")

	r := h.apply1(at(t0+sec, req("in-1", submitInput("s1", "a1", 1, "build it"))))
	if !proto.Equal(r, appendResult("s1", 6, 6)) {
		t.Fatalf("result %v, want seq 6", r)
	}
	e := h.event("s1", 6)
	want := &fsmpb.Event{SessionId: "s1", Seq: 6, Kind: KindInput, TimeUnixNano: t0 + sec, Text: "build it",
		Data: []byte(`{"attachment_id":"a1","client_kind":"terminal","client_name":"tty-a1","epoch":1}`), RequestId: "in-1"}
	if !proto.Equal(e, want) {
		t.Fatalf("input event %v, want %v", e, want)
	}
	if s := h.session("s1"); !slices.Equal(s.QueuedInputs, []uint64{6}) || s.TurnInputSeq != 0 || s.UpdatedUnixNano != t0+sec {
		t.Fatalf("after input: queued %v turn %d updated %d", s.QueuedInputs, s.TurnInputSeq, s.UpdatedUnixNano)
	}

	// More input queues behind it, in log order.
	rs := h.apply(submitInput("s1", "a1", 1, "and test it"), submitInput("s1", "a1", 1, "then ship"))
	wantErr(t, rs[0], "")
	wantErr(t, rs[1], "")
	if s := h.session("s1"); !slices.Equal(s.QueuedInputs, []uint64{6, 7, 8}) {
		t.Fatalf("queued %v, want [6 7 8]", s.QueuedInputs)
	}
	h.wantJournal("s1", withJournal("s1",
		"3 attachment.joined terminal tty-a1",
		"4 attachment.joined browser phone",
		"5 lease.taken lease taken by terminal tty-a1",
		"6 input build it",
		"7 input and test it",
		"8 input then ship",
	)...)
}

func TestSubmitInputErrorsAppendNothing(t *testing.T) {
	h := newHarness(t)
	interactive(t, h, "s1")
	interactive(t, h, "stopped")
	wantErr(t, h.apply1(at(t0, stop("stopped", "DONE"))), "")

	r := h.refused(submitInput("s1", "a2", 1, "hi"), ReasonLeaseNotHeld)
	wantErrMsg(t, r, ReasonLeaseNotHeld, "attachment a2 does not hold the input lease", "tty-a1 (attachment a1)")
	r = h.refused(submitInput("s1", "a1", 2, "hi"), ReasonStaleEpoch)
	wantErrMsg(t, r, ReasonStaleEpoch, "epoch 2", "current epoch is 1")

	h.refuseAll(t, []refusal{
		{"without the lease", submitInput("s1", "a2", 1, "hi"), ReasonLeaseNotHeld},
		{"stale epoch", submitInput("s1", "a1", 2, "hi"), ReasonStaleEpoch},
		{"epoch zero", submitInput("s1", "a1", 0, "hi"), ReasonStaleEpoch},
		{"unknown attachment", submitInput("s1", "ghost", 1, "hi"), ReasonAttachmentNotFound},
		{"empty attachment id", submitInput("s1", "", 1, "hi"), ReasonInvalidArgument},
		{"empty text", submitInput("s1", "a1", 1, ""), ReasonInvalidArgument},
		{"text too long", submitInput("s1", "a1", 1, strings.Repeat("x", MaxInputBytes+1)), ReasonInvalidArgument},
		{"unknown session", submitInput("nope", "a1", 1, "hi"), ReasonNotFound},
		{"stopped session", submitInput("stopped", "a1", 1, "hi"), ReasonSessionStopped},
		// The order a client can act on: stopped, then epoch, then lease.
		{"stopped beats stale epoch and no lease", submitInput("stopped", "a2", 7, "hi"), ReasonSessionStopped},
		{"stopped beats unknown attachment", submitInput("stopped", "ghost", 1, "hi"), ReasonSessionStopped},
		{"stale epoch beats no lease", submitInput("s1", "a2", 7, "hi"), ReasonStaleEpoch},
		{"stale epoch beats unknown attachment", submitInput("s1", "ghost", 7, "hi"), ReasonStaleEpoch},
	})

	// A detached holder has no lease and no attachment.
	wantErr(t, h.apply1(detach("s1", "a1", "")), "")
	h.refused(submitInput("s1", "a1", 1, "hi"), ReasonAttachmentNotFound)
	wantErrMsg(t, h.refused(submitInput("s1", "a2", 1, "hi"), ReasonLeaseNotHeld), ReasonLeaseNotHeld, "nobody does")
}

func TestSubmitInputAfterLeaseExpiry(t *testing.T) {
	h := newHarness(t)
	interactive(t, h, "s1") // lease until t0+MaxTTL
	wantErr(t, h.apply1(at(t0+MaxTTL-1, submitInput("s1", "a1", 1, "just in time"))), "")
	// The attachment outlives the lease (a keep-alive), but the lease lapsed.
	wantErr(t, h.apply1(at(t0+MaxTTL-1, keepAlive("s1", "a1", MaxTTL))), "")
	h.refused(at(t0+MaxTTL, submitInput("s1", "a1", 1, "too late")), ReasonLeaseNotHeld)
	if s := h.session("s1"); len(s.QueuedInputs) != 1 {
		t.Fatalf("queued %v, want one input", s.QueuedInputs)
	}
}
