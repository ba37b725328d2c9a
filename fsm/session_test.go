package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

func TestCreateSession(t *testing.T) {
	h := newHarness(t)
	r := h.apply1(at(t0+42, createFull("s1", "fix the build", "make CI green")))
	wantErr(t, r, "")

	want := &fsmpb.Session{
		SessionId:       "s1",
		Title:           "fix the build",
		Objective:       "make CI green",
		State:           fsmpb.SessionState_SESSION_STATE_ACTIVE,
		CreatedUnixNano: t0 + 42,
		UpdatedUnixNano: t0 + 42,
		HeadSeq:         2, // session.created, epoch.changed
		Epoch:           1,
		Placement:       &fsmpb.Placement{RuntimeAdapter: DefaultRuntimeAdapter},
		EnvelopeId:      "s1", // a root session makes its own envelope
	}
	if !proto.Equal(r.GetSession(), want) {
		t.Fatalf("result session = %v, want %v", r.GetSession(), want)
	}
	if got := h.session("s1"); !proto.Equal(got, want) {
		t.Fatalf("stored session = %v, want %v", got, want)
	}

	evs, head, err := h.f.Events("s1", 0, 10)
	if err != nil || head != 2 || len(evs) != 2 {
		t.Fatalf("Events = %v, head %d, err %v; want two events, head 2", evs, head, err)
	}
	wantEvs := []*fsmpb.Event{
		{SessionId: "s1", Seq: 1, Kind: KindSessionCreated, TimeUnixNano: t0 + 42, Text: "fix the build"},
		{SessionId: "s1", Seq: 2, Kind: KindEpochChanged, TimeUnixNano: t0 + 42, Text: "epoch 1: echo",
			Data: []byte(`{"epoch":1,"placement":{"runtime_adapter":"echo"}}`)},
	}
	for i := range wantEvs {
		if !proto.Equal(evs[i], wantEvs[i]) {
			t.Fatalf("event %d = %v, want %v", i+1, evs[i], wantEvs[i])
		}
	}
}

func TestCreateSessionPlacement(t *testing.T) {
	// The placement of epoch 1 is stored on the session and stated by the
	// epoch.changed event.
	h := newHarness(t)
	c := create("s1")
	p := &fsmpb.Placement{RuntimeAdapter: "claude", Provider: "anthropic", AccountRef: "team", Model: "opus", Node: "n2"}
	c.GetCreateSession().Placement = proto.Clone(p).(*fsmpb.Placement)
	wantErr(t, h.apply1(c), "")
	if s := h.session("s1"); !proto.Equal(s.Placement, p) || s.Epoch != 1 {
		t.Fatalf("session epoch %d placement %v, want 1, %v", s.Epoch, s.Placement, p)
	}
	// The provider binding starts as the placement's provider, with no
	// provider conversation yet.
	if s := h.session("s1"); s.Provider != "anthropic" || s.ProviderSessionId != "" || s.EnvelopeId != "s1" {
		t.Fatalf("session provider %q/%q envelope %q, want anthropic/\"\"/s1", s.Provider, s.ProviderSessionId, s.EnvelopeId)
	}
	h.wantJournal("s1", "1 session.created title s1", "2 epoch.changed epoch 1: claude opus on n2")
	want := `{"epoch":1,"placement":{"runtime_adapter":"claude","provider":"anthropic","account_ref":"team","model":"opus","node":"n2"}}`
	if got := string(h.event("s1", 2).Data); got != want {
		t.Fatalf("epoch.changed data = %s, want %s", got, want)
	}
}

func TestCreateSessionErrorsChangeNothing(t *testing.T) {
	tests := []struct {
		name string
		cmd  *fsmpb.Command
		want Reason
	}{
		{"duplicate id", create("existing"), ReasonAlreadyExists},
		{"duplicate id, other title", createFull("existing", "other", "other"), ReasonAlreadyExists},
		{"empty id", create(""), ReasonInvalidArgument},
		{"id too long", create(strings.Repeat("x", MaxSessionIDBytes+1)), ReasonInvalidArgument},
		{"id with NUL", create("a\x00b"), ReasonInvalidArgument},
		{"title too long", createFull("new", strings.Repeat("t", MaxTitleBytes+1), ""), ReasonInvalidArgument},
		{"objective too long", createFull("new", "", strings.Repeat("o", MaxObjectiveBytes+1)), ReasonInvalidArgument},
		{"placement field too long", func() *fsmpb.Command {
			c := create("new")
			c.GetCreateSession().Placement = &fsmpb.Placement{Model: strings.Repeat("m", MaxPlacementFieldBytes+1)}
			return c
		}(), ReasonInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply1(create("existing"))
			before := h.state()

			wantErr(t, h.apply1(tt.cmd), tt.want)

			if after := h.state(); after != before {
				t.Fatalf("failed create changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if h.f.AppliedIndex() != 2 {
				t.Fatalf("AppliedIndex = %d, want 2 (a failed command still consumes its entry)", h.f.AppliedIndex())
			}
		})
	}
}

func TestCreateSessionLimitsAreInclusive(t *testing.T) {
	h := newHarness(t)
	id := strings.Repeat("x", MaxSessionIDBytes)
	r := h.apply1(createFull(id, strings.Repeat("t", MaxTitleBytes), strings.Repeat("o", MaxObjectiveBytes)))
	wantErr(t, r, "")
	if got := h.session(id); got.HeadSeq != 2 {
		t.Fatalf("head = %d, want 2", got.HeadSeq)
	}
}

func TestStopSession(t *testing.T) {
	tests := []struct {
		name       string
		reason     string
		wantReason string
	}{
		{"default reason", "", DefaultStopReason},
		{"named reason", "BUDGET_EXHAUSTED", "BUDGET_EXHAUSTED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply1(at(t0+1, create("s1")))
			h.apply1(at(t0+2, appendEv("s1", ev("note", "hi"))))

			r := h.apply1(at(t0+3, stop("s1", tt.reason)))
			wantErr(t, r, "")
			want := &fsmpb.Session{
				SessionId:       "s1",
				Title:           "title s1",
				State:           fsmpb.SessionState_SESSION_STATE_STOPPED,
				StopReason:      tt.wantReason,
				CreatedUnixNano: t0 + 1,
				UpdatedUnixNano: t0 + 3,
				StoppedUnixNano: t0 + 3,
				HeadSeq:         4,
				Epoch:           1,
				Placement:       &fsmpb.Placement{RuntimeAdapter: DefaultRuntimeAdapter},
				EnvelopeId:      "s1",
			}
			if !proto.Equal(r.GetSession(), want) {
				t.Fatalf("stop result = %v, want %v", r.GetSession(), want)
			}
			if got := h.session("s1"); !proto.Equal(got, want) {
				t.Fatalf("stored session = %v, want %v", got, want)
			}
			h.wantJournal("s1", withJournal("s1",
				"3 note hi",
				"4 session.stopped "+tt.wantReason,
			)...)
			evs, _, _ := h.f.Events("s1", 4, 1)
			if evs[0].TimeUnixNano != t0+3 {
				t.Fatalf("stopped event time = %d, want %d", evs[0].TimeUnixNano, t0+3)
			}

			// Stopping again is a no-op: same session, first reason
			// stands, no new event.
			before := h.state()
			again := h.apply1(at(t0+4, stop("s1", "SOMETHING_ELSE")))
			wantErr(t, again, "")
			if !proto.Equal(again.GetSession(), want) {
				t.Fatalf("second stop result = %v, want %v", again.GetSession(), want)
			}
			if after := h.state(); after != before {
				t.Fatalf("second stop changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func TestStopSessionErrors(t *testing.T) {
	tests := []struct {
		name string
		cmd  *fsmpb.Command
		want Reason
	}{
		{"unknown session", stop("nope", ""), ReasonNotFound},
		{"empty id", stop("", ""), ReasonInvalidArgument},
		{"reason too long", stop("s1", strings.Repeat("r", MaxReasonBytes+1)), ReasonInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply1(create("s1"))
			before := h.state()
			wantErr(t, h.apply1(tt.cmd), tt.want)
			if after := h.state(); after != before {
				t.Fatalf("failed stop changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if s := h.session("s1"); s.State != fsmpb.SessionState_SESSION_STATE_ACTIVE {
				t.Fatalf("s1 state = %v, want ACTIVE", s.State)
			}
		})
	}
}

func TestUnknownCommandBody(t *testing.T) {
	h := newHarness(t)
	before := h.state()
	wantErr(t, h.apply1(&fsmpb.Command{}), ReasonInvalidArgument)
	if after := h.state(); after != before {
		t.Fatalf("empty command changed the state")
	}
}
