package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The reset ledger (DESIGN.md §5), one row at a time: what changes,
// what is kept and which events appear.

// working creates session id with an objective, a provider placement and a
// budget policy (spend 1000, context cap 1000), attaches a1 (a terminal
// holding the lease) and a2 (a phone), runs one turn to completion, queues
// two more inputs and charges one model request. The journal is then:
//
//	1 session.created     5 lease.taken     9 turn.completed
//	2 epoch.changed       6 input first    10 input second (queued)
//	3 attachment.joined   7 turn.started   11 input third  (queued)
//	4 attachment.joined   8 output         12 budget.charged (spend 100, context 300)
func working(t *testing.T, h *harness, id string) {
	t.Helper()
	c := createFull(id, "title "+id, "objective "+id)
	c.GetCreateSession().Placement = &fsmpb.Placement{Provider: "anthropic", Model: "opus"}
	c.GetCreateSession().Policy = budgetPolicy(&fsmpb.Budget{SpendMicros: 1000}, 1000)
	rs := h.apply(c,
		attachCmd(id, "a1", "terminal", "tty-a1", MaxTTL),
		attachCmd(id, "a2", "browser", "phone", MaxTTL),
		takeLease(id, "a1", false, MaxTTL),
		submitInput(id, "a1", 1, "first"),
		runnerAppend(id, 1, ev(KindTurnStarted, "")),
		runnerAppend(id, 1, ev(KindOutput, "done"), ev(KindTurnCompleted, "")),
		submitInput(id, "a1", 1, "second"),
		submitInput(id, "a1", 1, "third"),
		recordUsage(id, &fsmpb.Budget{SpendMicros: 100}, 300),
	)
	for i, r := range rs {
		if r.Error != nil {
			t.Fatalf("working(%s): command %d: %v", id, i, r.Error)
		}
	}
	s := h.session(id)
	if s.HeadSeq != 12 || !slices.Equal(s.QueuedInputs, []uint64{10, 11}) || s.TurnsCompleted != 1 || s.ContextUsed != 300 {
		t.Fatalf("working(%s): head %d queued %v turns %d context %d", id, s.HeadSeq, s.QueuedInputs, s.TurnsCompleted, s.ContextUsed)
	}
}

// workingEpochText is the epoch.changed text of a working session.
const workingEpochText = "epoch 1: echo opus"

func TestFreshSession(t *testing.T) {
	h := newHarness(t)
	working(t, h, "s1")
	before, env, lines := h.session("s1"), h.envelope("s1"), h.journal("s1")

	tf := h.clock + sec
	r := h.apply1(at(tf, fresh("s1", "p-fresh")))
	got := wantBoundary(t, r, "fresh", "s1", "")
	if r.GetBoundary().Pruned != 0 {
		t.Fatalf("pruned %d, want 0 (nothing was cached)", r.GetBoundary().Pruned)
	}

	// What changes: the provider-facing id and the epoch binding. What is
	// kept: everything else, queued inputs and the context axis included.
	want := proto.Clone(before).(*fsmpb.Session)
	want.Epoch, want.MaxEpoch, want.ProviderSessionId, want.HeadSeq, want.UpdatedUnixNano = 2, 2, "p-fresh", 13, tf
	if !proto.Equal(got, want) {
		t.Fatalf("result session %v, want %v", got, want)
	}
	if s := h.session("s1"); !proto.Equal(s, want) {
		t.Fatalf("stored session %v, want %v", s, want)
	}

	// One epoch.changed event, no reset boundary; history unchanged.
	h.wantJournal("s1", append(lines, "13 epoch.changed epoch 2: echo opus (fresh)")...)
	wantData := `{"epoch":2,"placement":{"runtime_adapter":"echo","provider":"anthropic","model":"opus"},"reason":"fresh","provider_session_id":"p-fresh"}`
	if d := string(h.event("s1", 13).Data); d != wantData {
		t.Fatalf("epoch.changed data %s, want %s", d, wantData)
	}
	if n := h.countKind("s1", KindResetBoundary); n != 0 {
		t.Fatalf("%d reset boundaries after fresh", n)
	}
	if e := h.envelope("s1"); !proto.Equal(e, env) {
		t.Fatalf("fresh changed the envelope: %v, was %v", e, env)
	}
	if c := h.children("s1"); len(c) != 0 || h.sessionCount() != 1 {
		t.Fatalf("fresh made sessions: children %v, %d sessions", c, h.sessionCount())
	}

	// The new epoch's runner serves the queued inputs; the old one is fenced.
	h.refused(runnerAppend("s1", 1, ev(KindTurnStarted, "")), ReasonStaleEpoch)
	wantErr(t, h.apply1(runnerAppend("s1", 2, ev(KindTurnStarted, ""))), "")
	if s := h.session("s1"); s.TurnInputSeq != 10 || !slices.Equal(s.QueuedInputs, []uint64{11}) {
		t.Fatalf("after fresh the turn runs on %d with %v queued, want 10 with [11]", s.TurnInputSeq, s.QueuedInputs)
	}
}

func TestFreshSessionReportsPrunedCache(t *testing.T) {
	// Cached provider state has no writer yet; a restored replica may
	// carry some. Fresh prunes and reports it, and a second fresh has
	// nothing left to prune.
	h := newHarness(t)
	working(t, h, "s1")
	h.poke("s1", func(s *fsmpb.Session) { s.ProviderCacheEntries = 7 })

	r := h.apply1(fresh("s1", "p-1"))
	wantBoundary(t, r, "fresh", "s1", "")
	if p := r.GetBoundary().Pruned; p != 7 {
		t.Fatalf("pruned %d, want 7", p)
	}
	if s := h.session("s1"); s.ProviderCacheEntries != 0 || s.Epoch != 2 {
		t.Fatalf("after fresh: cache %d epoch %d, want 0, 2", s.ProviderCacheEntries, s.Epoch)
	}
	if d := h.eventData("s1", 13); d["pruned"] != num(uint64(7)) {
		t.Fatalf("epoch.changed data %v, want pruned 7", d)
	}

	r = h.apply1(fresh("s1", "p-2"))
	if p := r.GetBoundary().Pruned; p != 0 {
		t.Fatalf("second fresh pruned %d, want 0", p)
	}
	if _, ok := h.eventData("s1", 14)["pruned"]; ok {
		t.Fatal("a fresh that pruned nothing reports a pruned count")
	}
	if s := h.session("s1"); s.Epoch != 3 || s.ProviderSessionId != "p-2" {
		t.Fatalf("epoch %d provider id %q, want 3, p-2", s.Epoch, s.ProviderSessionId)
	}
}

func TestFreshSessionRefusals(t *testing.T) {
	h := newHarness(t)
	working(t, h, "s1")
	h.apply(create("stopped"), stop("stopped", ""))
	h.refuseAll(t, []refusal{
		{"unknown session", fresh("nope", "p"), ReasonNotFound},
		{"empty session id", fresh("", "p"), ReasonInvalidArgument},
		{"no provider id", fresh("s1", ""), ReasonInvalidArgument},
		{"stopped session", fresh("stopped", "p"), ReasonSessionStopped},
	})
}

func TestResetSession(t *testing.T) {
	h := newHarness(t)
	working(t, h, "s1")
	before, env, lines := h.session("s1"), h.envelope("s1"), h.journal("s1")

	tr := h.clock + sec
	got := wantBoundary(t, h.apply1(at(tr, reset("s1", "p-reset"))), "reset", "s1", "")

	// What changes: the boundary, queued inputs dropped, the context axis
	// re-armed, a new provider-facing id. What is kept: identity, title,
	// objective, placement, epoch, lease, attachments, turn count.
	want := proto.Clone(before).(*fsmpb.Session)
	want.QueuedInputs = nil
	want.ContextUsed = 0
	want.ProviderSessionId = "p-reset"
	want.Resets = 1
	want.ResetSeq = 13
	want.HeadSeq = 13
	want.UpdatedUnixNano = tr
	if !proto.Equal(got, want) {
		t.Fatalf("result session %v, want %v", got, want)
	}
	s := h.session("s1")
	if !proto.Equal(s, want) {
		t.Fatalf("stored session %v, want %v", s, want)
	}
	if s.Title != "title s1" || s.Objective != "objective s1" || s.Placement.GetModel() != "opus" || s.Epoch != 1 ||
		LeaseHolder(s, tr) != "a1" || s.Attachments != 2 || s.State != fsmpb.SessionState_SESSION_STATE_ACTIVE {
		t.Fatalf("reset lost what it keeps: %v", s)
	}

	// The whole history stays readable, the boundary is appended after it.
	h.wantJournal("s1", append(lines, "13 reset_boundary context reset")...)
	wantData := `{"cleared_inputs":[10,11],"provider_session_id":"p-reset","context_rearmed_to":1000}`
	if d := string(h.event("s1", 13).Data); d != wantData {
		t.Fatalf("reset_boundary data %s, want %s", d, wantData)
	}
	if e := h.envelope("s1"); !proto.Equal(e, env) {
		t.Fatalf("reset changed the envelope: %v, was %v", e, env)
	}
	if c := h.children("s1"); len(c) != 0 || h.sessionCount() != 1 {
		t.Fatalf("reset made sessions: children %v, %d sessions", c, h.sessionCount())
	}

	// The cleared inputs are gone for the runner; new input is served.
	h.refused(runnerAppend("s1", 1, ev(KindTurnStarted, "")), ReasonTurnOrder)
	wantErr(t, h.apply1(submitInput("s1", "a1", 1, "after the reset")), "") // 14
	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindTurnStarted, ""))), "")
	h.wantTurnState("s1", turnState{turn: 14, completed: 1})

	// A second reset (once that turn is done) moves the boundary.
	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindTurnCompleted, ""))), "") // 16
	wantBoundary(t, h.apply1(reset("s1", "p-reset-2")), "reset", "s1", "")
	if s := h.session("s1"); s.ResetSeq != 17 || s.Resets != 2 || s.ProviderSessionId != "p-reset-2" {
		t.Fatalf("second reset: seq %d resets %d provider %q", s.ResetSeq, s.Resets, s.ProviderSessionId)
	}
	if d := string(h.event("s1", 17).Data); d != `{"provider_session_id":"p-reset-2","context_rearmed_to":1000}` {
		t.Fatalf("second reset_boundary data %s", d)
	}
}

func TestResetRefusedWhileTurnInFlight(t *testing.T) {
	h := newHarness(t)
	working(t, h, "s1")
	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindTurnStarted, ""))), "") // 13, on input 10

	r := h.refused(reset("s1", "p"), ReasonBusy)
	wantErrMsg(t, r, ReasonBusy, "a turn is in flight (input #10)")

	// Still busy while the turn waits for an approval.
	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindToolCall, "rm"), ev(KindApprovalRequested, "may I?"))), "") // 14, 15
	h.refused(reset("s1", "p"), ReasonBusy)

	// Once the turn completes, the reset goes through. A pending approval
	// only exists inside a turn, so none is left to clear.
	wantErr(t, h.apply1(answerApproval("s1", "a2", 15, true, "")), "")                                   // 16
	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindToolResult, "ok"), ev(KindTurnCompleted, ""))), "") // 17, 18
	wantBoundary(t, h.apply1(reset("s1", "p")), "reset", "s1", "")
	s := h.session("s1")
	if s.ResetSeq != 19 || s.QueuedInputs != nil || s.TurnInputSeq != 0 || s.PendingApprovalSeq != 0 || s.TurnsCompleted != 2 {
		t.Fatalf("after reset: %v", s)
	}
	if d := string(h.event("s1", 19).Data); d != `{"cleared_inputs":[11],"provider_session_id":"p","context_rearmed_to":1000}` {
		t.Fatalf("reset_boundary data %s", d)
	}
}

func TestResetSessionRefusals(t *testing.T) {
	h := newHarness(t)
	working(t, h, "s1")
	h.apply(create("stopped"), stop("stopped", ""))
	h.refuseAll(t, []refusal{
		{"unknown session", reset("nope", "p"), ReasonNotFound},
		{"empty session id", reset("", "p"), ReasonInvalidArgument},
		{"no provider id", reset("s1", ""), ReasonInvalidArgument},
		{"stopped session", reset("stopped", "p"), ReasonSessionStopped},
	})
}

func TestClearAndNewSession(t *testing.T) {
	tests := []struct {
		name, source, reason, provider string
		wantReason, wantProvider       string
	}{
		{"provider clear", "clear", "", "claude", StopProviderClear, "claude"},
		{"user clear", "clear", StopUserClear, "", StopUserClear, "anthropic"},
		{"user new", "new", StopUserNew, "", StopUserNew, "anthropic"},
		{"provider new", "new", StopProviderClear, "codex", StopProviderClear, "codex"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			working(t, h, "s1")
			// A turn is in flight and an input queued: clear is not
			// refused, and neither carries over.
			wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindTurnStarted, ""))), "") // 13
			before, env, lines := h.session("s1"), h.envelope("s1"), h.journal("s1")

			tc := h.clock + sec
			child := ChildSessionID("s1", "p-2")
			r := h.apply1(at(tc, clearCmd("s1", tt.source, tt.reason, tt.provider, "p-2")))
			got := wantBoundary(t, r, tt.source, child, "s1")

			// The old session: STOPPED with the reason, kept and readable.
			old := proto.Clone(before).(*fsmpb.Session)
			old.State = fsmpb.SessionState_SESSION_STATE_STOPPED
			old.StopReason = tt.wantReason
			old.HeadSeq = 14
			old.UpdatedUnixNano, old.StoppedUnixNano = tc, tc
			if s := h.session("s1"); !proto.Equal(s, old) {
				t.Fatalf("old session %v, want %v", s, old)
			}
			h.wantJournal("s1", append(lines, "14 session.stopped "+tt.wantReason)...)
			if d := string(h.event("s1", 14).Data); d != fmt.Sprintf(`{"child":%q,"source":%q}`, child, tt.source) {
				t.Fatalf("session.stopped data %s", d)
			}

			// The child: a new logical session in the same envelope, with a
			// re-armed context axis and nothing conversation-local.
			want := &fsmpb.Session{
				SessionId: child, Title: "title s1", State: fsmpb.SessionState_SESSION_STATE_ACTIVE,
				CreatedUnixNano: tc, UpdatedUnixNano: tc, HeadSeq: 3, Epoch: 1,
				Placement:  proto.Clone(before.Placement).(*fsmpb.Placement),
				EnvelopeId: "s1", ContextCap: 1000, ContextUsed: 0,
				Provider: tt.wantProvider, ProviderSessionId: "p-2",
				ParentSession: "s1", BoundarySource: tt.source,
			}
			if !proto.Equal(got, want) {
				t.Fatalf("result child %v, want %v", got, want)
			}
			c := h.session(child)
			if !proto.Equal(c, want) {
				t.Fatalf("stored child %v, want %v", c, want)
			}
			if c.Objective != "" || c.QueuedInputs != nil || c.TurnInputSeq != 0 || c.Lease != nil || c.Attachments != 0 {
				t.Fatalf("child carries conversation state: %v", c)
			}
			h.wantJournal(child,
				"1 session.created title s1",
				"2 epoch.changed "+workingEpochText,
				"3 fak.session.provider_boundary.v1 "+tt.source+" of s1",
			)
			for seq := uint64(1); seq <= 3; seq++ {
				if e := h.event(child, seq); e.TimeUnixNano != tc {
					t.Fatalf("child event %d at %d, want %d", seq, e.TimeUnixNano, tc)
				}
			}

			// Lineage and the shared envelope.
			wantEdges := []*fsmpb.LineageEdge{{Parent: "s1", Child: child, Source: tt.source, TimeUnixNano: tc}}
			if edges := h.children("s1"); len(edges) != 1 || !proto.Equal(edges[0], wantEdges[0]) {
				t.Fatalf("lineage %v, want %v", edges, wantEdges)
			}
			if len(h.children(child)) != 0 {
				t.Fatal("the child has children")
			}
			wantEnv := proto.Clone(env).(*fsmpb.Envelope)
			wantEnv.Sessions = 2
			if e := h.envelope("s1"); !proto.Equal(e, wantEnv) {
				t.Fatalf("envelope %v, want %v", e, wantEnv)
			}

			// The old session takes nothing more; the child is live.
			h.refused(submitInput("s1", "a1", 1, "late"), ReasonSessionStopped)
			h.refused(spend("s1", 1), ReasonSessionStopped)
			h.refused(runnerAppend("s1", 1, ev(KindOutput, "late")), ReasonSessionStopped)
			wantErr(t, h.apply1(attachT(child, "a9")), "")
			wantErr(t, h.apply1(takeLease(child, "a9", false, MaxTTL)), "")
			wantErr(t, h.apply1(submitInput(child, "a9", 1, "fresh start")), "")

			// The boundary row, exactly as the seed defines it. The
			// provider it names is the child's provider.
			bd := fmt.Sprintf(`{"provider":%q,"source":%q,"previous_session":"s1","new_provider_session_id":"p-2"}`, tt.wantProvider, tt.source)
			if d := string(h.event(child, 3).Data); d != bd {
				if tt.provider == "" {
					t.Fatalf("boundary-provider: a ClearSession without a provider (every user clear/new from "+
						"SessionService) writes the fak.session.provider_boundary.v1 row %s, naming no provider, although "+
						"the child inherits the session's provider %q", d, tt.wantProvider)
				}
				t.Fatalf("provider boundary data %s, want %s", d, bd)
			}
		})
	}
}

func TestClearSessionRefusals(t *testing.T) {
	h := newHarness(t)
	working(t, h, "s1")
	h.apply(create("stopped"), stop("stopped", ""))
	h.refuseAll(t, []refusal{
		{"no source", clearCmd("s1", "", "", "claude", "p"), ReasonInvalidArgument},
		{"unknown source", clearCmd("s1", "reset", "", "claude", "p"), ReasonInvalidArgument},
		{"fork is not a clear", clearCmd("s1", "fork", "", "claude", "p"), ReasonInvalidArgument},
		{"no provider id", clearCmd("s1", "clear", "", "claude", ""), ReasonInvalidArgument},
		{"unknown session", clearCmd("nope", "clear", "", "claude", "p"), ReasonNotFound},
		{"empty session id", clearCmd("", "clear", "", "claude", "p"), ReasonInvalidArgument},
		{"stopped session", clearCmd("stopped", "clear", "", "claude", "p"), ReasonSessionStopped},
	})
}

func TestClearSessionBoundsItsInputs(t *testing.T) {
	// StopSession bounds its reason (MaxReasonBytes) and hooks bound the
	// provider id (MaxSessionIDBytes); ClearSession must too, since Apply,
	// not the API, is the authority.
	h := newHarness(t)
	working(t, h, "s1")
	before := h.state()
	r := h.apply1(clearCmd("s1", "clear", strings.Repeat("R", MaxReasonBytes+1), "claude", "p"))
	if ReasonOf(ResultError(r)) != ReasonInvalidArgument {
		t.Fatalf("clear-unbounded: ClearSession accepts a %d-byte stop reason (StopSession refuses more than %d) "+
			"and an unbounded provider and provider session id; result %v", MaxReasonBytes+1, MaxReasonBytes, r.GetBoundary().GetAction())
	}
	h.wantUnchanged(before, "an overlong clear")
}

func TestClearSessionRepeatIsNoOp(t *testing.T) {
	h := newHarness(t)
	working(t, h, "s1")
	child := ChildSessionID("s1", "p-2")
	first := h.apply1(req("clear-1", clearCmd("s1", "clear", "", "claude", "p-2")))
	wantBoundary(t, first, "clear", child, "s1")
	after := h.state()

	// The hook delivered again (a new request id): the same child, no change.
	r := h.apply1(req("clear-2", clearCmd("s1", "clear", "", "claude", "p-2")))
	wantNoOpBoundary(t, r, child)
	if r.GetBoundary().PreviousSession != "s1" {
		t.Fatalf("no-op names previous %q, want s1", r.GetBoundary().PreviousSession)
	}
	// Without a request id, or with new as the source: still the same child.
	wantNoOpBoundary(t, h.apply1(clearCmd("s1", "clear", "", "claude", "p-2")), child)
	wantNoOpBoundary(t, h.apply1(clearCmd("s1", "new", StopUserNew, "", "p-2")), child)
	// A retry under the first request id returns the first result itself.
	if r := h.apply1(req("clear-1", clearCmd("s1", "clear", "", "claude", "p-2"))); !proto.Equal(r, first) {
		t.Fatalf("retry of clear-1 = %v, want the first result %v", r, first)
	}
	// Long after the request ids are forgotten, the child id still holds.
	wantNoOpBoundary(t, h.apply1(at(h.clock+DedupWindow+sec, req("clear-1", clearCmd("s1", "clear", "", "claude", "p-2")))), child)
	// Dedup records aside, nothing changed: one child, one stop, one edge.
	if len(h.children("s1")) != 1 || h.countKind("s1", KindSessionStopped) != 1 ||
		h.countKind(child, KindProviderBoundary) != 1 || h.sessionCount() != 2 || h.envelope("s1").Sessions != 2 {
		t.Fatalf("repeats changed the ledger: children %v, %d sessions", h.children("s1"), h.sessionCount())
	}
	if !sameSessions(t, h, after) {
		t.Fatal("repeats changed a session or journal")
	}

	// Another provider id on the stopped parent is refused, not a second child.
	h.refused(clearCmd("s1", "clear", "", "claude", "p-3"), ReasonSessionStopped)

	// The child clears in turn: a grandchild, a lineage of three.
	grand := ChildSessionID(child, "p-3")
	wantBoundary(t, h.apply1(clearCmd(child, "new", "", "codex", "p-3")), "new", grand, child)
	if edges := h.children(child); len(edges) != 1 || edges[0].Child != grand || edges[0].Source != "new" {
		t.Fatalf("child's lineage %v", edges)
	}
	if g := h.session(grand); g.EnvelopeId != "s1" || g.ParentSession != child || h.envelope("s1").Sessions != 3 {
		t.Fatalf("grandchild %v, envelope sessions %d", g, h.envelope("s1").Sessions)
	}
}

func TestClearSessionRepeatWithinOneEntry(t *testing.T) {
	// Two deliveries of the same hook committed in one entry: one boundary.
	h := newHarness(t)
	working(t, h, "s1")
	child := ChildSessionID("s1", "p-2")
	rs := h.apply(clearCmd("s1", "clear", "", "claude", "p-2"), clearCmd("s1", "clear", "", "claude", "p-2"))
	wantBoundary(t, rs[0], "clear", child, "s1")
	wantNoOpBoundary(t, rs[1], child)
	if len(h.children("s1")) != 1 || h.countKind(child, KindProviderBoundary) != 1 {
		t.Fatal("two boundaries for one provider id")
	}
}

// sameSessions reports whether the sessions and journal buckets of h equal
// those of an earlier state dump (request records may differ).
func sameSessions(t *testing.T, h *harness, earlier string) bool {
	t.Helper()
	pick := func(dump string) string {
		var keep []string
		in := false
		for _, line := range strings.Split(dump, "\n") {
			if strings.HasPrefix(line, "[") {
				in = line == "[sessions]" || line == "[journal]" || line == "[lineage]" || line == "[envelopes]"
			}
			if in {
				keep = append(keep, line)
			}
		}
		return strings.Join(keep, "\n")
	}
	return pick(h.state()) == pick(earlier)
}

func TestChildSessionID(t *testing.T) {
	// The derivation is part of the replicated contract: every replica and
	// every version must map (parent, provider id) to the same child.
	want := func(parent, pid string) string {
		sum := sha256.Sum256([]byte(parent + "\x00" + pid))
		return "ses_" + hex.EncodeToString(sum[:])[:28]
	}
	seen := map[string]string{}
	for _, in := range [][2]string{
		{"s1", "p-2"}, {"s1", "p-3"}, {"s2", "p-2"}, {"s1", ""}, {"", "s1"},
		{"s1p", "-2"}, {"s1", "p-2\x00"}, {strings.Repeat("s", MaxSessionIDBytes), strings.Repeat("p", MaxSessionIDBytes)},
	} {
		id := ChildSessionID(in[0], in[1])
		if id != ChildSessionID(in[0], in[1]) || id != want(in[0], in[1]) {
			t.Fatalf("ChildSessionID(%q, %q) = %s, want %s", in[0], in[1], id, want(in[0], in[1]))
		}
		if len(id) != 32 || validSessionID(id) != nil {
			t.Fatalf("ChildSessionID(%q, %q) = %q is not a valid 32-byte session id", in[0], in[1], id)
		}
		if prev, dup := seen[id]; dup {
			t.Fatalf("ChildSessionID(%q, %q) = %s, same as for %s", in[0], in[1], id, prev)
		}
		seen[id] = in[0] + "/" + in[1]
	}
}

func TestForkSession(t *testing.T) {
	h := newHarness(t)
	working(t, h, "s1")
	// A turn in flight whose output is one chunk (13-15), so the fork
	// address falls inside a stored chunk; input 11 stays queued.
	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindTurnStarted, ""), ev(KindOutput, "a"), ev(KindOutput, "b"))), "")
	before, env := h.session("s1"), h.envelope("s1")
	srcEvents, _, _ := h.f.Events("s1", 1, 100)

	tf := h.clock + sec
	got := wantBoundary(t, h.apply1(at(tf, req("fork-1", forkCmd("s1", 14, "f1", "p-fork")))), "fork", "f1", "s1")

	want := &fsmpb.Session{
		SessionId: "f1", Title: "title s1", Objective: "objective s1", State: fsmpb.SessionState_SESSION_STATE_ACTIVE,
		CreatedUnixNano: tf, UpdatedUnixNano: tf, HeadSeq: 15, Epoch: 1,
		Placement:  proto.Clone(before.Placement).(*fsmpb.Placement),
		EnvelopeId: "s1", ContextCap: 1000, Provider: "anthropic", ProviderSessionId: "p-fork",
		ParentSession: "s1", ForkAddress: 14, BoundarySource: "fork",
	}
	if !proto.Equal(got, want) {
		t.Fatalf("result fork %v, want %v", got, want)
	}
	if s := h.session("f1"); !proto.Equal(s, want) {
		t.Fatalf("stored fork %v, want %v", s, want)
	}

	// History up to the address, with the same seqs (and kinds, times,
	// texts, data and request ids), then the fork event.
	evs, head, err := h.f.Events("f1", 1, 100)
	if err != nil || head != 15 || len(evs) != 15 {
		t.Fatalf("fork journal: %d events, head %d, %v", len(evs), head, err)
	}
	for i, e := range evs[:14] {
		w := proto.Clone(srcEvents[i]).(*fsmpb.Event)
		w.SessionId = "f1"
		if !proto.Equal(e, w) {
			t.Fatalf("fork event %d = %v, want %v", i+1, e, w)
		}
	}
	if e := evs[14]; e.Seq != 15 || e.Kind != KindSessionForked || e.Text != "forked from s1" || e.RequestId != "fork-1" ||
		string(e.Data) != `{"source_session":"s1","fork_address":14,"copied_events":14}` {
		t.Fatalf("fork event %v", e)
	}

	// The source is untouched: same record, same journal, still running.
	if s := h.session("s1"); !proto.Equal(s, before) {
		t.Fatalf("source changed: %v, was %v", s, before)
	}
	if now, _, _ := h.f.Events("s1", 1, 100); len(now) != len(srcEvents) {
		t.Fatalf("source journal has %d events, had %d", len(now), len(srcEvents))
	}
	wantErr(t, h.apply1(submitInput("s1", "a1", 1, "source goes on")), "")                          // 16
	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindOutput, "c"), ev(KindTurnCompleted, ""))), "") // 17, 18
	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindTurnStarted, ""))), "")                        // 19, on 11
	h.wantTurnState("s1", turnState{queued: []uint64{16}, turn: 11, completed: 2})

	// Queued inputs and the running turn are not inherited.
	h.wantTurnState("f1", turnState{})
	h.refused(runnerAppend("f1", 1, ev(KindTurnStarted, "")), ReasonTurnOrder)
	h.refused(runnerAppend("f1", 1, ev(KindOutput, "x")), ReasonTurnOrder)

	// Lineage and the shared envelope.
	if edges := h.children("s1"); len(edges) != 1 ||
		!proto.Equal(edges[0], &fsmpb.LineageEdge{Parent: "s1", Child: "f1", Source: "fork", AtSeq: 14, TimeUnixNano: tf}) {
		t.Fatalf("lineage %v", edges)
	}
	wantEnv := proto.Clone(env).(*fsmpb.Envelope)
	wantEnv.Sessions = 2
	if e := h.envelope("s1"); !proto.Equal(e, wantEnv) {
		t.Fatalf("envelope %v, want %v", e, wantEnv)
	}
}

func TestForkSessionAtHead(t *testing.T) {
	h := newHarness(t)
	working(t, h, "s1")
	got := wantBoundary(t, h.apply1(forkCmd("s1", 0, "f1", "")), "fork", "f1", "s1")
	if got.ForkAddress != 12 || got.HeadSeq != 13 {
		t.Fatalf("fork at head: address %d head %d, want 12, 13", got.ForkAddress, got.HeadSeq)
	}
	if k := h.kinds("f1", 12); !slices.Equal(k, []string{KindBudgetCharged, KindSessionForked}) {
		t.Fatalf("fork journal tail %q", k)
	}
	// The fork is a session of its own: it can be attached to, typed into
	// and forked again.
	wantErr(t, h.apply1(attachT("f1", "b1")), "")
	wantErr(t, h.apply1(takeLease("f1", "b1", false, MaxTTL)), "")
	wantErr(t, h.apply1(submitInput("f1", "b1", 1, "on the branch")), "")
	if s := h.session("f1"); !slices.Equal(s.QueuedInputs, []uint64{16}) {
		t.Fatalf("fork queue %v, want [16]", s.QueuedInputs)
	}
	g := wantBoundary(t, h.apply1(forkCmd("f1", 5, "f2", "")), "fork", "f2", "f1")
	if g.EnvelopeId != "s1" || g.HeadSeq != 6 || g.ParentSession != "f1" {
		t.Fatalf("fork of a fork %v", g)
	}
	if e := h.envelope("s1"); e.Sessions != 3 {
		t.Fatalf("envelope sessions %d, want 3", e.Sessions)
	}
	if h.session("s1").HeadSeq != 12 {
		t.Fatal("forking changed the source's head")
	}
}

func TestForkSessionRepeatAndRefusals(t *testing.T) {
	h := newHarness(t)
	working(t, h, "s1")
	h.apply1(create("s2"))
	wantBoundary(t, h.apply1(forkCmd("s1", 9, "f1", "p")), "fork", "f1", "s1")

	before := h.state()
	wantNoOpBoundary(t, h.apply1(forkCmd("s1", 9, "f1", "p")), "f1")
	wantNoOpBoundary(t, h.apply1(forkCmd("s1", 0, "f1", "other")), "f1") // the id names the fork
	if !sameSessions(t, h, before) {
		t.Fatal("a repeated fork changed the ledger")
	}

	h.refuseAll(t, []refusal{
		{"unknown source", forkCmd("nope", 0, "f9", ""), ReasonNotFound},
		{"empty source", forkCmd("", 0, "f9", ""), ReasonInvalidArgument},
		{"address past the head", forkCmd("s1", 13, "f9", ""), ReasonInvalidArgument},
		{"no fork id", forkCmd("s1", 0, "", ""), ReasonInvalidArgument},
		{"fork id with NUL", forkCmd("s1", 0, "f\x009", ""), ReasonInvalidArgument},
		{"fork id too long", forkCmd("s1", 0, strings.Repeat("f", MaxSessionIDBytes+1), ""), ReasonInvalidArgument},
		{"fork id taken by another session", forkCmd("s1", 0, "s2", ""), ReasonAlreadyExists},
		{"fork id is the source", forkCmd("s1", 0, "s1", ""), ReasonAlreadyExists},
		{"fork id is a fork of another source", forkCmd("s2", 0, "f1", ""), ReasonAlreadyExists},
	})
}
