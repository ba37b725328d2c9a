package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

func TestAttach(t *testing.T) {
	h := newHarness(t)
	h.apply1(at(t0, create("s1")))
	c := attachCmd("s1", "a1", "terminal", "alice@laptop", 30*sec)
	c.GetAttach().Node = "n2"
	c.GetAttach().Capabilities = []string{"ansi", "approve"}
	r := h.apply1(at(t0+5, req("att-1", c)))
	wantErr(t, r, "")

	want := &fsmpb.Attachment{
		SessionId: "s1", AttachmentId: "a1", ClientKind: "terminal", ClientName: "alice@laptop",
		Capabilities: []string{"ansi", "approve"}, Node: "n2",
		JoinedUnixNano: t0 + 5, SeenUnixNano: t0 + 5, ExpiresUnixNano: t0 + 5 + 30*sec,
	}
	if !proto.Equal(r.GetAttachment(), want) {
		t.Fatalf("result attachment = %v, want %v", r.GetAttachment(), want)
	}
	if got := h.attachment("s1", "a1"); !proto.Equal(got, want) {
		t.Fatalf("stored attachment = %v, want %v", got, want)
	}
	h.wantJournal("s1", withJournal("s1", "3 attachment.joined terminal alice@laptop")...)
	e := h.event("s1", 3)
	if e.TimeUnixNano != t0+5 || e.RequestId != "att-1" {
		t.Fatalf("joined event time %d request %q", e.TimeUnixNano, e.RequestId)
	}
	wantData := `{"attachment_id":"a1","client_kind":"terminal","client_name":"alice@laptop","node":"n2","capabilities":["ansi","approve"]}`
	if string(e.Data) != wantData {
		t.Fatalf("joined data = %s, want %s", e.Data, wantData)
	}
	s := h.session("s1")
	if s.Attachments != 1 || s.UpdatedUnixNano != t0+5 || s.Lease != nil {
		t.Fatalf("session after attach: attachments %d, updated %d, lease %v", s.Attachments, s.UpdatedUnixNano, s.Lease)
	}

	// Attachment ids are scoped to their session.
	h.apply1(create("s2"))
	wantErr(t, h.apply1(attachT("s2", "a1")), "")
	if h.session("s1").Attachments != 1 || h.session("s2").Attachments != 1 {
		t.Fatal("an attachment to s2 counted against s1")
	}
}

func TestAttachErrorsAppendNothing(t *testing.T) {
	caps := make([]string, MaxCapabilities+1)
	for i := range caps {
		caps[i] = "c"
	}
	withCaps := func(cs ...string) *fsmpb.Command {
		c := attachT("s1", "new")
		c.GetAttach().Capabilities = cs
		return c
	}
	tests := []struct {
		name string
		cmd  *fsmpb.Command
		want Reason
	}{
		{"duplicate id", attachT("s1", "a1"), ReasonAlreadyExists},
		{"duplicate id, other client", attachCmd("s1", "a1", "browser", "other", 10*sec), ReasonAlreadyExists},
		{"unknown session", attachT("nope", "new"), ReasonNotFound},
		{"empty session id", attachT("", "new"), ReasonInvalidArgument},
		{"empty attachment id", attachT("s1", ""), ReasonInvalidArgument},
		{"attachment id too long", attachT("s1", strings.Repeat("a", MaxAttachmentIDBytes+1)), ReasonInvalidArgument},
		{"empty client kind", attachCmd("s1", "new", "", "x", 30*sec), ReasonInvalidArgument},
		{"client kind too long", attachCmd("s1", "new", strings.Repeat("k", MaxClientKindBytes+1), "x", 30*sec), ReasonInvalidArgument},
		{"client name too long", attachCmd("s1", "new", "terminal", strings.Repeat("n", MaxClientNameBytes+1), 30*sec), ReasonInvalidArgument},
		{"too many capabilities", withCaps(caps...), ReasonInvalidArgument},
		{"empty capability", withCaps("ansi", ""), ReasonInvalidArgument},
		{"capability too long", withCaps(strings.Repeat("c", MaxCapabilityBytes+1)), ReasonInvalidArgument},
		{"ttl zero", attachCmd("s1", "new", "terminal", "x", 0), ReasonInvalidArgument},
		{"ttl negative", attachCmd("s1", "new", "terminal", "x", -sec), ReasonInvalidArgument},
		{"ttl under 1s", attachCmd("s1", "new", "terminal", "x", MinTTL-1), ReasonInvalidArgument},
		{"ttl over 10m", attachCmd("s1", "new", "terminal", "x", MaxTTL+1), ReasonInvalidArgument},
		// Validation comes before the lookup: a bad attach to a missing
		// session is INVALID_ARGUMENT, not NOT_FOUND.
		{"bad ttl, unknown session", attachCmd("nope", "new", "terminal", "x", 0), ReasonInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply(create("s1"), attachT("s1", "a1"))
			head := h.session("s1").HeadSeq
			h.refused(tt.cmd, tt.want)
			if s := h.session("s1"); s.HeadSeq != head || s.Attachments != 1 {
				t.Fatalf("head %d attachments %d, want %d and 1", s.HeadSeq, s.Attachments, head)
			}
		})
	}
}

func TestAttachLimitsAreInclusive(t *testing.T) {
	h := newHarness(t)
	h.apply1(create("s1"))
	caps := make([]string, MaxCapabilities)
	for i := range caps {
		caps[i] = strings.Repeat("c", MaxCapabilityBytes)
	}
	long := attachCmd("s1", strings.Repeat("a", MaxAttachmentIDBytes), strings.Repeat("k", MaxClientKindBytes),
		strings.Repeat("n", MaxClientNameBytes), MaxTTL)
	long.GetAttach().Capabilities = caps
	for _, c := range []*fsmpb.Command{
		long,
		attachCmd("s1", "short", "terminal", "", MinTTL),
	} {
		wantErr(t, h.apply1(c), "")
	}
	if s := h.session("s1"); s.Attachments != 2 || s.HeadSeq != 4 {
		t.Fatalf("attachments %d head %d, want 2 and 4", s.Attachments, s.HeadSeq)
	}
}

func TestKeepAlive(t *testing.T) {
	h := newHarness(t)
	h.apply1(at(t0, create("s1")))
	h.apply1(at(t0, attachCmd("s1", "a1", "terminal", "x", 30*sec)))
	before := h.journal("s1")
	session := h.session("s1")

	r := h.apply1(at(t0+20*sec, keepAlive("s1", "a1", 60*sec)))
	wantErr(t, r, "")
	got := h.attachment("s1", "a1")
	if got.SeenUnixNano != t0+20*sec || got.ExpiresUnixNano != t0+80*sec || got.JoinedUnixNano != t0 {
		t.Fatalf("after keep-alive: joined %d seen %d expires %d", got.JoinedUnixNano, got.SeenUnixNano, got.ExpiresUnixNano)
	}
	if !proto.Equal(r.GetAttachment(), got) {
		t.Fatalf("result %v, stored %v", r.GetAttachment(), got)
	}
	// Presence is ephemeral: no event, and the session record is untouched.
	h.wantJournal("s1", before...)
	if s := h.session("s1"); !proto.Equal(s, session) {
		t.Fatalf("keep-alive changed the session: %v, was %v", s, session)
	}

	// A shorter ttl may shorten the expiry: it is always now + ttl.
	wantErr(t, h.apply1(at(t0+21*sec, keepAlive("s1", "a1", MinTTL))), "")
	if got := h.attachment("s1", "a1").ExpiresUnixNano; got != t0+22*sec {
		t.Fatalf("expires %d, want %d", got, t0+22*sec)
	}

	h.refuseAll(t, []refusal{
		{"unknown attachment", keepAlive("s1", "ghost", 30*sec), ReasonAttachmentNotFound},
		{"empty attachment id", keepAlive("s1", "", 30*sec), ReasonInvalidArgument},
		{"unknown session", keepAlive("nope", "a1", 30*sec), ReasonNotFound},
		{"ttl under 1s", keepAlive("s1", "a1", MinTTL-1), ReasonInvalidArgument},
		{"ttl over 10m", keepAlive("s1", "a1", MaxTTL+1), ReasonInvalidArgument},
	})
}

func TestDetach(t *testing.T) {
	h := newHarness(t)
	h.apply1(at(t0, create("s1")))
	h.apply(at(t0, attachT("s1", "a1")), at(t0, attachT("s1", "a2")))
	wantErr(t, h.apply1(at(t0+sec, takeLease("s1", "a1", false, 30*sec))), "")
	head := h.session("s1").HeadSeq // 5: created, epoch, joined x2, lease.taken

	// Detaching a client without the lease writes attachment.left only.
	r := h.apply1(at(t0+2*sec, detach("s1", "a2", "")))
	wantErr(t, r, "")
	if r.NoOp || r.GetAttachment().GetAttachmentId() != "a2" {
		t.Fatalf("detach result %v", r)
	}
	h.wantJournal("s1", withJournal("s1",
		"3 attachment.joined terminal tty-a1",
		"4 attachment.joined terminal tty-a2",
		"5 lease.taken lease taken by terminal tty-a1",
		"6 attachment.left terminal tty-a2 left: detached",
	)...)
	if d := h.eventData("s1", head+1); d["attachment_id"] != "a2" || d["reason"] != "detached" {
		t.Fatalf("left data = %v", d)
	}
	if h.attachment("s1", "a2") != nil {
		t.Fatal("detached attachment still stored")
	}
	if s := h.session("s1"); s.Attachments != 1 || LeaseHolder(s, t0+2*sec) != "a1" {
		t.Fatalf("attachments %d holder %q", s.Attachments, LeaseHolder(s, t0+2*sec))
	}

	// Detaching the holder releases its lease first, in the same command.
	wantErr(t, h.apply1(at(t0+3*sec, detach("s1", "a1", "closed the terminal"))), "")
	h.wantJournal("s1", withJournal("s1",
		"3 attachment.joined terminal tty-a1",
		"4 attachment.joined terminal tty-a2",
		"5 lease.taken lease taken by terminal tty-a1",
		"6 attachment.left terminal tty-a2 left: detached",
		"7 lease.released lease released: closed the terminal",
		"8 attachment.left terminal tty-a1 left: closed the terminal",
	)...)
	if d := h.eventData("s1", 7); d["attachment_id"] != "a1" || d["reason"] != "closed the terminal" {
		t.Fatalf("lease.released data = %v", d)
	}
	s := h.session("s1")
	if s.Lease != nil || s.Attachments != 0 || s.UpdatedUnixNano != t0+3*sec {
		t.Fatalf("after detaching the holder: lease %v attachments %d updated %d", s.Lease, s.Attachments, s.UpdatedUnixNano)
	}

	// Detaching twice changes nothing and says so.
	before := h.state()
	wantNoOp(t, h.apply1(detach("s1", "a1", "")))
	wantNoOp(t, h.apply1(detach("s1", "never-attached", "expired")))
	if h.state() != before {
		t.Fatal("a repeated detach changed the state")
	}

	h.refuseAll(t, []refusal{
		{"unknown session", detach("nope", "a1", ""), ReasonNotFound},
		{"empty attachment id", detach("s1", "", ""), ReasonInvalidArgument},
		{"reason too long", detach("s1", "a1", strings.Repeat("r", MaxReasonBytes+1)), ReasonInvalidArgument},
	})
}

func TestDetachExpired(t *testing.T) {
	// The leader's reaper detaches with reason "expired". That is a no-op
	// until the attachment has lapsed at the command's time, so a
	// keep-alive that raced the reaper wins.
	h := newHarness(t)
	h.apply1(at(t0, create("s1")))
	h.apply1(at(t0, attachCmd("s1", "a1", "browser", "phone", 10*sec))) // expires t0+10s
	wantErr(t, h.apply1(at(t0, takeLease("s1", "a1", false, 60*sec))), "")

	before := h.state()
	for _, now := range []int64{t0 + sec, t0 + 10*sec - 1} {
		r := h.apply1(at(now, detach("s1", "a1", DetachExpired)))
		wantNoOp(t, r)
		if r.GetAttachment().GetAttachmentId() != "a1" {
			t.Fatalf("no-op reaper result %v, want the live attachment", r)
		}
	}
	if h.state() != before {
		t.Fatal("a premature reaper detach changed the state")
	}

	// A keep-alive moves the expiry; the reaper waits for the new one.
	wantErr(t, h.apply1(at(t0+9*sec, keepAlive("s1", "a1", 10*sec))), "") // expires t0+19s
	wantNoOp(t, h.apply1(at(t0+15*sec, detach("s1", "a1", DetachExpired))))

	r := h.apply1(at(t0+19*sec, detach("s1", "a1", DetachExpired)))
	wantErr(t, r, "")
	if r.NoOp {
		t.Fatalf("reaper detach after expiry is a no-op: %v", r)
	}
	j := h.journal("s1")
	if got := j[len(j)-2:]; got[0] != "5 lease.released lease released: expired" || got[1] != "6 attachment.left browser phone left: expired" {
		t.Fatalf("journal ends %q", got)
	}
	if s := h.session("s1"); s.Attachments != 0 || s.Lease != nil {
		t.Fatalf("after expiry: attachments %d lease %v", s.Attachments, s.Lease)
	}
}
