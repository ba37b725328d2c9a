package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Guarded launches and provider hooks: the provider vocabulary table of
// DESIGN.md §5, as the FSM interprets it.

// guarded creates session s1 (spend limit 1000, context cap 1000) as the
// API does for a launch — on the external runtime of launch L — and binds
// L to it for provider.
func guarded(t *testing.T, h *harness, provider string) {
	t.Helper()
	wantErr(t, h.apply1(createExternal("s1", "L", provider, budgetPolicy(&fsmpb.Budget{SpendMicros: 1000}, 1000))), "")
	wantBoundary(t, h.apply1(bindLaunch("L", provider, "s1")), "bound", "s1", "")
}

func TestBindLaunch(t *testing.T) {
	h := newHarness(t)
	tb := t0 + 5
	h.apply(create("s1"), create("s2"), create("stopped"), stop("stopped", ""))
	wantBoundary(t, h.apply1(at(tb, bindLaunch("L", "codex", "s1"))), "bound", "s1", "")
	want := &fsmpb.Launch{LaunchId: "L", Provider: "codex", DefaultSession: "s1", CreatedUnixNano: tb, UpdatedUnixNano: tb}
	if l := h.launch("L"); !proto.Equal(l, want) {
		t.Fatalf("launch %v, want %v", l, want)
	}

	// s1 ran on echo: binding it makes it the launch's, external, in a new
	// epoch that fences its runner.
	if s := h.session("s1"); s.Epoch != 2 || !proto.Equal(s.Placement, externalPlacement("L", "codex")) || s.Provider != "codex" {
		t.Fatalf("bound session %v", s)
	}
	h.wantKinds("s1", 3, KindEpochChanged)

	// Binding moves the default; the launch keeps its creation time.
	wantBoundary(t, h.apply1(at(tb+1, bindLaunch("L", "codex", "s2"))), "bound", "s2", "")
	if l := h.launch("L"); l.DefaultSession != "s2" || l.CreatedUnixNano != tb || l.UpdatedUnixNano != tb+1 {
		t.Fatalf("rebound launch %v", l)
	}

	h.refuseAll(t, []refusal{
		{"no launch id", bindLaunch("", "codex", "s1"), ReasonInvalidArgument},
		{"launch id too long", bindLaunch(strings.Repeat("L", MaxSessionIDBytes+1), "codex", "s1"), ReasonInvalidArgument},
		{"provider too long", bindLaunch("L2", strings.Repeat("p", MaxPlacementFieldBytes+1), "s1"), ReasonInvalidArgument},
		{"unknown session", bindLaunch("L2", "codex", "nope"), ReasonNotFound},
		{"stopped session", bindLaunch("L2", "codex", "stopped"), ReasonSessionStopped},
	})
	if _, err := h.f.Launch("L2"); ReasonOf(err) != ReasonNotFound {
		t.Fatalf("a refused bind made a launch: %v", err)
	}
}

func TestBindLaunchAgainIsNoOp(t *testing.T) {
	h := newHarness(t)
	guarded(t, h, "codex")
	before := h.state()
	r := h.apply1(bindLaunch("L", "codex", "s1"))
	wantErr(t, r, "")
	if !r.NoOp || h.state() != before {
		t.Fatal("bind-noop: bindLaunch's doc says binding again to the same session is a no-op, " +
			"but it rewrites the launch (UpdatedUnixNano) and returns a result without no_op")
	}
}

func TestProviderStartupBinds(t *testing.T) {
	h := newHarness(t)
	guarded(t, h, "codex")
	ts := h.clock + sec
	r := h.apply1(at(ts, withMetadata(hookStart("L", "startup", "A"), `{"model":"gpt","cwd":"/w"}`)))
	got := wantBoundary(t, r, "bound", "s1", "")
	if got.Provider != "codex" || got.ProviderSessionId != "A" || got.Epoch != 1 {
		t.Fatalf("bound session %v", got)
	}
	if s := h.session("s1"); !proto.Equal(s, got) {
		t.Fatalf("stored %v, result %v", s, got)
	}
	h.wantJournal("s1", "1 session.created title s1", "2 epoch.changed epoch 1: external: codex runs on host laptop (launch L)", "3 provider.bound codex A")
	wantData := `{"provider":"codex","source":"startup","provider_session_id":"A","launch":"L","metadata":{"model":"gpt","cwd":"/w"}}`
	if d := string(h.event("s1", 3).Data); d != wantData {
		t.Fatalf("provider.bound data %s, want %s", d, wantData)
	}
	if l := h.launch("L"); l.ProviderSessionId != "A" || l.DefaultSession != "s1" || l.UpdatedUnixNano != ts {
		t.Fatalf("launch %v", l)
	}

	// The same startup again (Codex fires it at each turn start, hooks are
	// redelivered): a no-op.
	before := h.state()
	wantNoOpBoundary(t, h.apply1(hookStart("L", "startup", "A")), "s1")
	h.wantUnchanged(before, "a repeated startup")
}

func TestProviderHookMetadata(t *testing.T) {
	// Valid JSON is kept verbatim, anything else dropped; never an error.
	h := newHarness(t)
	guarded(t, h, "mytool")
	wantErr(t, h.apply1(withMetadata(hookStart("L", "compact", "A"), `not json {`)), "")
	if d := string(h.event("s1", 3).Data); d != `{"provider":"mytool","source":"compact","provider_session_id":"A","launch":"L"}` {
		t.Fatalf("compaction data %s", d)
	}
	// The hook may name its provider; otherwise the launch's applies.
	c := hookEnd("L", "other", "A")
	c.GetProviderSessionEnd().Provider = "gemini"
	wantErr(t, h.apply1(withMetadata(c, `{"unknown":[1,2]}`)), "")
	if d := string(h.event("s1", 4).Data); d != `{"provider":"gemini","reason":"other","provider_session_id":"A","launch":"L","metadata":{"unknown":[1,2]}}` {
		t.Fatalf("session_end data %s", d)
	}
	h.refused(withMetadata(hookStart("L", "compact", "A"), strings.Repeat(" ", MaxMetadataBytes+1)), ReasonInvalidArgument)
	h.refused(withMetadata(hookEnd("L", "exit", "A"), strings.Repeat(" ", MaxMetadataBytes+1)), ReasonInvalidArgument)
}

func TestCodexStartupNewAndClear(t *testing.T) {
	// Codex: startup A binds, startup A again is a no-op, startup B is
	// /new (one boundary, source new), clear C one more; each repeat is a
	// no-op.
	h := newHarness(t)
	guarded(t, h, "codex")
	wantBoundary(t, h.apply1(hookStart("L", "startup", "A")), "bound", "s1", "")
	wantNoOpBoundary(t, h.apply1(hookStart("L", "startup", "A")), "s1")

	c1 := ChildSessionID("s1", "B")
	got := wantBoundary(t, h.apply1(hookStart("L", "startup", "B")), "new", c1, "s1")
	if got.BoundarySource != "new" || got.Provider != "codex" || got.ProviderSessionId != "B" {
		t.Fatalf("child %v", got)
	}
	if s := h.session("s1"); s.State != fsmpb.SessionState_SESSION_STATE_STOPPED || s.StopReason != StopProviderClear {
		t.Fatalf("old session %v %s", s.State, s.StopReason)
	}
	if d := string(h.event(c1, 3).Data); d != `{"provider":"codex","source":"new","previous_session":"s1","new_provider_session_id":"B"}` {
		t.Fatalf("boundary data %s", d)
	}
	if l := h.launch("L"); l.DefaultSession != c1 || l.ProviderSessionId != "B" {
		t.Fatalf("launch %v", l)
	}
	before := h.state()
	wantNoOpBoundary(t, h.apply1(hookStart("L", "startup", "B")), c1)
	h.wantUnchanged(before, "startup B again")

	c2 := ChildSessionID(c1, "C")
	wantBoundary(t, h.apply1(hookStart("L", "clear", "C")), "clear", c2, c1)
	if l := h.launch("L"); l.DefaultSession != c2 || l.ProviderSessionId != "C" {
		t.Fatalf("launch %v", l)
	}
	before = h.state()
	wantNoOpBoundary(t, h.apply1(hookStart("L", "clear", "C")), c2)
	h.wantUnchanged(before, "clear C redelivered")

	// Two boundaries in all, one per provider conversation.
	if h.sessionCount() != 3 || len(h.children("s1")) != 1 || len(h.children(c1)) != 1 || len(h.children(c2)) != 0 {
		t.Fatalf("%d sessions; lineage %v %v", h.sessionCount(), h.children("s1"), h.children(c1))
	}
	if e := h.envelope("s1"); e.Sessions != 3 {
		t.Fatalf("envelope sessions %d", e.Sessions)
	}
}

func TestClaudeClearMovesDefaultSession(t *testing.T) {
	// Claude Code: startup binds; /clear is SessionEnd(clear, old) then
	// SessionStart(clear, new); a redelivered SessionStart is a no-op.
	h := newHarness(t)
	guarded(t, h, "claude")
	wantErr(t, h.apply1(hookStart("L", "startup", "A")), "")
	wantErr(t, h.apply1(launchUsage("L", &fsmpb.Budget{SpendMicros: 950}, 999)), "")

	wantBoundary(t, h.apply1(hookEnd("L", "clear", "A")), "end", "s1", "")
	h.wantKinds("s1", 5, KindProviderEnd)
	if len(h.children("s1")) != 0 || h.launch("L").DefaultSession != "s1" {
		t.Fatal("SessionEnd made a boundary")
	}

	child := ChildSessionID("s1", "B")
	wantBoundary(t, h.apply1(hookStart("L", "clear", "B")), "clear", child, "s1")
	if l := h.launch("L"); l.DefaultSession != child {
		t.Fatalf("default session %s, want the child %s", l.DefaultSession, child)
	}
	before := h.state()
	wantNoOpBoundary(t, h.apply1(hookStart("L", "clear", "B")), child)
	h.wantUnchanged(before, "a redelivered clear")

	// Usage without a trace id now charges the child: the envelope is
	// shared (950 of 1000 spent), the context axis re-armed.
	wantErr(t, h.apply1(launchUsage("L", &fsmpb.Budget{SpendMicros: 100}, 0)), ReasonBudgetExhausted)
	wantErr(t, h.apply1(launchUsage("L", &fsmpb.Budget{SpendMicros: 50}, 1000)), "")
	h.wantKinds(child, 4, KindBudgetExhausted, KindBudgetCharged)
	if d := h.eventData(child, 5); d["via_launch"] != "L" || d["envelope"] != "s1" {
		t.Fatalf("charge data %v", d)
	}
	if s := h.session("s1"); s.HeadSeq != 6 || s.ContextUsed != 999 {
		t.Fatalf("the old session was charged after the clear: head %d context %d", s.HeadSeq, s.ContextUsed)
	}
	if c := h.session(child); c.ContextUsed != 1000 {
		t.Fatalf("child context used %d", c.ContextUsed)
	}
	// A trace id still names its session, even through a launch.
	c := launchUsage("L", nil, 0)
	c.GetRecordUsage().SessionId = "s1"
	h.refused(c, ReasonSessionStopped)
}

func TestGeminiClearIsOneBoundary(t *testing.T) {
	// Gemini CLI: SessionEnd(clear) then SessionStart(clear), here in one
	// entry, as the guard may commit them together.
	h := newHarness(t)
	guarded(t, h, "gemini")
	wantErr(t, h.apply1(hookStart("L", "startup", "A")), "")
	child := ChildSessionID("s1", "B")
	rs := h.apply(hookEnd("L", "clear", "A"), hookStart("L", "clear", "B"))
	wantBoundary(t, rs[0], "end", "s1", "")
	wantBoundary(t, rs[1], "clear", child, "s1")
	h.wantKinds("s1", 3, KindProviderBound, KindProviderEnd, KindSessionStopped)
	if len(h.children("s1")) != 1 || h.sessionCount() != 2 || h.countKind(child, KindProviderBoundary) != 1 {
		t.Fatalf("want exactly one boundary: children %v, %d sessions", h.children("s1"), h.sessionCount())
	}
	// Gemini's /new is an alias of /clear: the same transition again.
	grand := ChildSessionID(child, "C")
	rs = h.apply(hookEnd("L", "clear", "B"), hookStart("L", "clear", "C"))
	wantBoundary(t, rs[1], "clear", grand, child)
	if h.sessionCount() != 3 {
		t.Fatalf("%d sessions, want 3", h.sessionCount())
	}
}

func TestProviderSessionEndIsAuditOnly(t *testing.T) {
	h := newHarness(t)
	guarded(t, h, "claude")
	wantErr(t, h.apply1(hookStart("L", "startup", "A")), "")
	for i, reason := range []string{"clear", "resume", "logout", "prompt_input_exit", "other", "exit"} {
		te := h.clock + sec
		wantBoundary(t, h.apply1(at(te, hookEnd("L", reason, "A"))), "end", "s1", "")
		e := h.event("s1", uint64(4+i))
		if e.Kind != KindProviderEnd || e.Text != "claude session ended: "+reason || e.TimeUnixNano != te {
			t.Fatalf("event %v", e)
		}
	}
	s := h.session("s1")
	if s.State != fsmpb.SessionState_SESSION_STATE_ACTIVE || s.Epoch != 1 || s.ProviderSessionId != "A" || len(h.children("s1")) != 0 {
		t.Fatalf("SessionEnd changed the session: %v", s)
	}
	if l := h.launch("L"); l.DefaultSession != "s1" || l.ProviderSessionId != "A" {
		t.Fatalf("SessionEnd changed the launch: %v", l)
	}
	h.refuseAll(t, []refusal{
		{"unknown launch", hookEnd("nope", "exit", "A"), ReasonNotFound},
		{"no launch", hookEnd("", "exit", "A"), ReasonInvalidArgument},
		{"reason too long", hookEnd("L", strings.Repeat("r", MaxReasonBytes+1), "A"), ReasonInvalidArgument},
		{"provider id too long", hookEnd("L", "exit", strings.Repeat("p", MaxSessionIDBytes+1)), ReasonInvalidArgument},
	})
}

func TestProviderResumeKeepsSession(t *testing.T) {
	h := newHarness(t)
	guarded(t, h, "claude")
	wantErr(t, h.apply1(hookStart("L", "startup", "A")), "")
	wantErr(t, h.apply1(contextUse("s1", 400)), "")

	tr := h.clock + sec
	got := wantBoundary(t, h.apply1(at(tr, hookStart("L", "resume", "R"))), "resume", "s1", "")
	if got.Epoch != 2 || got.ProviderSessionId != "R" || got.State != fsmpb.SessionState_SESSION_STATE_ACTIVE || got.ContextUsed != 400 {
		t.Fatalf("resumed session %v", got)
	}
	h.wantKinds("s1", 5, KindEpochChanged)
	e := h.event("s1", 5)
	if e.Text != "epoch 2: external: claude runs on host laptop (launch L) (resume)" ||
		string(e.Data) != `{"epoch":2,"placement":{"runtime_adapter":"external","provider":"claude","launch_id":"L","host":"laptop"},"reason":"resume","provider_session_id":"R"}` {
		t.Fatalf("epoch.changed %v data %s", e, e.Data)
	}
	if l := h.launch("L"); l.DefaultSession != "s1" || l.ProviderSessionId != "R" {
		t.Fatalf("launch %v", l)
	}
	if len(h.children("s1")) != 0 || h.sessionCount() != 1 {
		t.Fatal("resume made a session")
	}
	before := h.state()
	wantNoOpBoundary(t, h.apply1(hookStart("L", "resume", "R")), "s1")
	h.wantUnchanged(before, "a repeated resume")

	// After a resume, a redelivered startup of R is the same conversation.
	wantNoOpBoundary(t, h.apply1(hookStart("L", "startup", "R")), "s1")
	// And a clear after it still makes its one boundary.
	wantBoundary(t, h.apply1(hookStart("L", "clear", "B")), "clear", ChildSessionID("s1", "B"), "s1")
}

func TestProviderCompactKeepsSession(t *testing.T) {
	h := newHarness(t)
	guarded(t, h, "claude")
	wantErr(t, h.apply1(hookStart("L", "startup", "A")), "")
	before := h.session("s1")
	got := wantBoundary(t, h.apply1(hookStart("L", "compact", "A")), "compact", "s1", "")
	h.wantKinds("s1", 4, KindCompaction)
	if h.event("s1", 4).Text != "provider compaction" {
		t.Fatalf("compaction event %v", h.event("s1", 4))
	}
	if got.Epoch != before.Epoch || got.ProviderSessionId != "A" || len(h.children("s1")) != 0 ||
		h.countKind("s1", KindResetBoundary) != 0 || h.launch("L").DefaultSession != "s1" {
		t.Fatalf("compact changed more than the journal: %v", got)
	}
}

func TestProviderForkBecomesDefault(t *testing.T) {
	h := newHarness(t)
	guarded(t, h, "claude")
	wantErr(t, h.apply1(hookStart("L", "startup", "A")), "")
	wantErr(t, h.apply1(spend("s1", 900)), "")

	fork := ChildSessionID("s1", "F")
	got := wantBoundary(t, h.apply1(hookStart("L", "fork", "F")), "fork", fork, "s1")
	if got.ParentSession != "s1" || got.BoundarySource != "fork" || got.ForkAddress != 4 || got.ProviderSessionId != "F" ||
		got.EnvelopeId != "s1" {
		t.Fatalf("fork %v", got)
	}
	if l := h.launch("L"); l.DefaultSession != fork || l.ProviderSessionId != "F" {
		t.Fatalf("launch %v", l)
	}
	// Branch semantics, never a clear: the source keeps running.
	if s := h.session("s1"); s.State != fsmpb.SessionState_SESSION_STATE_ACTIVE || s.HeadSeq != 4 {
		t.Fatalf("source after the fork: %v", s)
	}
	if h.countKind(fork, KindProviderBoundary) != 0 {
		t.Fatal("a fork wrote a provider boundary")
	}
	wantErr(t, h.apply1(launchUsage("L", &fsmpb.Budget{SpendMicros: 101}, 0)), ReasonBudgetExhausted)
	wantErr(t, h.apply1(spend("s1", 50)), "")
	wantErr(t, h.apply1(launchUsage("L", &fsmpb.Budget{SpendMicros: 50}, 0)), "")
	h.wantUsed("s1", &fsmpb.Budget{SpendMicros: 1000})

	// The fork hook delivered again: the same fork, nothing new.
	before := h.state()
	r := h.apply1(hookStart("L", "fork", "F"))
	if r.Error != nil || !r.NoOp || h.sessionCount() != 2 {
		t.Fatalf("fork-redelivery: a repeated SessionStart(fork) with the same provider id forks the "+
			"launch's default session (already the fork) again: result %v, %d sessions; startup, clear and "+
			"resume treat the bound provider id as a no-op, fork does not", r.GetBoundary().GetSession().GetSessionId(), h.sessionCount())
	}
	h.wantUnchanged(before, "a redelivered fork")
}

func TestProviderSessionStartRefusals(t *testing.T) {
	h := newHarness(t)
	guarded(t, h, "claude")
	wantErr(t, h.apply1(hookStart("L", "startup", "A")), "")
	h.apply(create("s2"), bindLaunch("L2", "claude", "s2"), stop("s2", ""))
	h.refuseAll(t, []refusal{
		// A UI-only clear sends nothing; an unknown source changes nothing.
		{"unknown source", hookStart("L", "ui-clear", "B"), ReasonInvalidArgument},
		{"no source", hookStart("L", "", "B"), ReasonInvalidArgument},
		{"no provider id", hookStart("L", "clear", ""), ReasonInvalidArgument},
		{"provider id too long", hookStart("L", "clear", strings.Repeat("p", MaxSessionIDBytes+1)), ReasonInvalidArgument},
		{"unknown launch", hookStart("nope", "clear", "B"), ReasonNotFound},
		{"no launch", hookStart("", "clear", "B"), ReasonInvalidArgument},
		// The launch's session was stopped: fail toward the stricter state.
		{"stopped default: startup", hookStart("L2", "startup", "A"), ReasonSessionStopped},
		{"stopped default: clear", hookStart("L2", "clear", "B"), ReasonSessionStopped},
		{"stopped default: resume", hookStart("L2", "resume", "R"), ReasonSessionStopped},
		{"stopped default: compact", hookStart("L2", "compact", "A"), ReasonSessionStopped},
		{"stopped default: usage", launchUsage("L2", nil, 1), ReasonSessionStopped},
	})
	r := h.refused(hookStart("L", "bogus-source", "B"), ReasonInvalidArgument)
	wantErrMsg(t, r, ReasonInvalidArgument, `unknown SessionStart source "bogus-source"`)
}
