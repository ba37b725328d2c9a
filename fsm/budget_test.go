package fsm

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Budget envelopes (DESIGN.md §5): one envelope per lineage, a
// context axis per logical session, and no boundary that buys a new
// allowance.

func TestCreateSessionMakesEnvelope(t *testing.T) {
	h := newHarness(t)
	lim := &fsmpb.Budget{Turns: 10, OutputTokens: 20, Queries: 30, SpendMicros: 40, ToolCalls: 50}
	p := &fsmpb.Policy{Limits: lim, ContextCap: 1000, Priority: "high", Pace: "steady", QaEnvelope: "strict"}
	tc := t0 + 7
	wantErr(t, h.apply1(at(tc, createPolicy("s1", p))), "")

	want := &fsmpb.Envelope{EnvelopeId: "s1", Limits: lim, Used: &fsmpb.Budget{}, CreatedUnixNano: tc,
		Priority: "high", Pace: "steady", QaEnvelope: "strict", Sessions: 1}
	if e := h.envelope("s1"); !proto.Equal(e, want) {
		t.Fatalf("envelope %v, want %v", e, want)
	}
	if s := h.session("s1"); s.EnvelopeId != "s1" || s.ContextCap != 1000 || s.ContextUsed != 0 {
		t.Fatalf("session budget fields: envelope %q cap %d used %d", s.EnvelopeId, s.ContextCap, s.ContextUsed)
	}

	// Without a policy: an unlimited envelope and no context cap.
	wantErr(t, h.apply1(at(tc+1, create("s2"))), "")
	want = &fsmpb.Envelope{EnvelopeId: "s2", Limits: &fsmpb.Budget{}, Used: &fsmpb.Budget{}, CreatedUnixNano: tc + 1, Sessions: 1}
	if e := h.envelope("s2"); !proto.Equal(e, want) {
		t.Fatalf("envelope %v, want %v", e, want)
	}
	if s := h.session("s2"); s.ContextCap != 0 {
		t.Fatalf("context cap %d, want 0 (unlimited)", s.ContextCap)
	}

	// A create refused as a duplicate leaves the first envelope alone.
	h.refused(createPolicy("s1", budgetPolicy(&fsmpb.Budget{SpendMicros: 1 << 40}, 0)), ReasonAlreadyExists)
	if _, err := h.f.Envelope("nope"); ReasonOf(err) != ReasonNotFound {
		t.Fatalf("Envelope(nope) = %v, want NOT_FOUND", err)
	}
}

func TestRecordUsage(t *testing.T) {
	h := newHarness(t)
	wantErr(t, h.apply1(createPolicy("s1", budgetPolicy(&fsmpb.Budget{Turns: 10, SpendMicros: 1000}, 500))), "")

	tc := h.clock + sec
	use := &fsmpb.Budget{Turns: 1, OutputTokens: 50, Queries: 1, SpendMicros: 200, ToolCalls: 2}
	r := h.apply1(at(tc, recordUsage("s1", use, 100)))
	wantErr(t, r, "")
	if e := r.GetEnvelope(); !proto.Equal(e.Used, use) || e.LastChargeUnixNano != tc || e.Refusals != 0 {
		t.Fatalf("result envelope %v", e)
	}
	h.wantUsed("s1", use)
	h.wantKinds("s1", 3, KindBudgetCharged)
	wantData := `{"usage":{"turns":1,"output_tokens":50,"queries":1,"spend_micros":200,"tool_calls":2},"context_tokens":100,"envelope":"s1"}`
	if e := h.event("s1", 3); string(e.Data) != wantData || e.Text != "" || e.TimeUnixNano != tc {
		t.Fatalf("budget.charged event %v, data want %s", e, wantData)
	}
	if s := h.session("s1"); s.ContextUsed != 100 || s.UpdatedUnixNano != tc {
		t.Fatalf("context used %d updated %d", s.ContextUsed, s.UpdatedUnixNano)
	}

	// Limits are inclusive: reaching one exactly is allowed.
	wantErr(t, h.apply1(spend("s1", 800)), "")
	wantErr(t, h.apply1(contextUse("s1", 400)), "")
	// Axes without a limit never run out.
	wantErr(t, h.apply1(recordUsage("s1", &fsmpb.Budget{OutputTokens: 1 << 40, ToolCalls: 1 << 30}, 0)), "")
	used := &fsmpb.Budget{Turns: 1, OutputTokens: 50 + 1<<40, Queries: 1, SpendMicros: 1000, ToolCalls: 2 + 1<<30}
	h.wantUsed("s1", used)
	lastCharge := h.envelope("s1").LastChargeUnixNano

	// One more micro is refused, and the refusal is journaled.
	tr := h.clock + sec
	r = h.apply1(at(tr, spend("s1", 1)))
	wantErrMsg(t, r, ReasonBudgetExhausted, "spend_micros budget of session s1 is exhausted")
	e := h.event("s1", 7)
	if e.Kind != KindBudgetExhausted || e.Text != "refused: spend_micros exhausted" || e.TimeUnixNano != tr ||
		string(e.Data) != `{"usage":{"spend_micros":1},"envelope":"s1","exhausted":"spend_micros"}` {
		t.Fatalf("budget.exhausted event %v (data %s)", e, e.Data)
	}
	env := h.envelope("s1")
	if !proto.Equal(env.Used, used) || env.Refusals != 1 || env.LastChargeUnixNano != lastCharge {
		t.Fatalf("after a refusal: used %v refusals %d last charge %d", env.Used, env.Refusals, env.LastChargeUnixNano)
	}

	// A refused charge debits nothing, not even its axes within limits.
	// A call's start (turns, queries) is refused by the axis used up
	// (spend, at its limit), before any it would pass itself.
	wantErrMsg(t, h.apply1(recordUsage("s1", &fsmpb.Budget{Turns: 10, Queries: 5}, 0)), ReasonBudgetExhausted, "spend_micros budget")
	wantErrMsg(t, h.apply1(recordUsage("s1", &fsmpb.Budget{OutputTokens: 5}, 1)), ReasonBudgetExhausted, "context_tokens budget")
	h.wantUsed("s1", used)
	if s := h.session("s1"); s.ContextUsed != 500 {
		t.Fatalf("context used %d, want 500", s.ContextUsed)
	}
	if d := h.eventData("s1", 9); d["exhausted"] != "context_tokens" {
		t.Fatalf("context refusal data %v", d)
	}
	if env := h.envelope("s1"); env.Refusals != 3 {
		t.Fatalf("refusals %d, want 3", env.Refusals)
	}

	// A retried refusal (same request id) is the stored result: not a
	// second budget.exhausted event.
	r = h.apply1(req("charge-9", spend("s1", 5)))
	wantErr(t, r, ReasonBudgetExhausted)
	before := h.state()
	if again := h.apply1(req("charge-9", spend("s1", 5))); !proto.Equal(again, r) {
		t.Fatalf("retry = %v, want %v", again, r)
	}
	h.wantUnchanged(before, "a retried refusal")
	if n := h.countKind("s1", KindBudgetExhausted); n != 4 {
		t.Fatalf("%d budget.exhausted events, want 4", n)
	}
}

func TestRecordUsageRefusals(t *testing.T) {
	h := newHarness(t)
	h.apply(create("s1"), create("stopped"), stop("stopped", ""))
	h.refuseAll(t, []refusal{
		{"neither session nor launch", spend("", 1), ReasonInvalidArgument},
		{"unknown session", spend("nope", 1), ReasonNotFound},
		{"stopped session", spend("stopped", 1), ReasonSessionStopped},
		{"unknown launch", launchUsage("nope", &fsmpb.Budget{SpendMicros: 1}, 0), ReasonNotFound},
		{"launch id too long", launchUsage(string(make([]byte, MaxSessionIDBytes+1)), nil, 0), ReasonInvalidArgument},
	})
}

// axisBudget is a budget of n on one named axis.
func axisBudget(axis string, n uint64) *fsmpb.Budget {
	b := &fsmpb.Budget{}
	switch axis {
	case "turns":
		b.Turns = n
	case "output_tokens":
		b.OutputTokens = n
	case "queries":
		b.Queries = n
	case "spend_micros":
		b.SpendMicros = n
	case "tool_calls":
		b.ToolCalls = n
	default:
		panic(axis)
	}
	return b
}

var budgetAxes = []string{"turns", "output_tokens", "queries", "spend_micros", "tool_calls"}

func TestNoQuotaLaunderingAcrossClearAndNew(t *testing.T) {
	// Spend 95% of an axis, clear (or new): the child has 5% left, not a
	// fresh allowance. Every carried axis, both boundaries.
	for _, axis := range budgetAxes {
		for _, source := range []string{"clear", "new"} {
			t.Run(axis+"/"+source, func(t *testing.T) {
				h := newHarness(t)
				wantErr(t, h.apply1(createPolicy("s1", budgetPolicy(axisBudget(axis, 100), 0))), "")
				wantErr(t, h.apply1(recordUsage("s1", axisBudget(axis, 95), 0)), "")
				child := ChildSessionID("s1", "p-2")
				wantBoundary(t, h.apply1(clearCmd("s1", source, "", "claude", "p-2")), source, child, "s1")
				parentHead := h.session("s1").HeadSeq

				r := h.apply1(recordUsage(child, axisBudget(axis, 10), 0))
				wantErrMsg(t, r, ReasonBudgetExhausted, axis+" budget of session "+child)
				h.wantKinds(child, 4, KindBudgetExhausted)
				if d := h.eventData(child, 4); d["exhausted"] != axis || d["envelope"] != "s1" {
					t.Fatalf("budget.exhausted data %v", d)
				}
				if env := h.envelope("s1"); env.Refusals != 1 {
					t.Fatalf("refusals %d, want 1", env.Refusals)
				}
				if h.session("s1").HeadSeq != parentHead {
					t.Fatal("the child's refusal was journaled on the parent")
				}

				// The remaining 5% is the child's to spend, and no more.
				wantErr(t, h.apply1(recordUsage(child, axisBudget(axis, 5), 0)), "")
				wantErr(t, h.apply1(recordUsage(child, axisBudget(axis, 1), 0)), ReasonBudgetExhausted)
				h.wantUsed("s1", axisBudget(axis, 100))
				h.wantKinds(child, 4, KindBudgetExhausted, KindBudgetCharged, KindBudgetExhausted)
			})
		}
	}
}

func TestEnvelopeCarriesPolicyAcrossBoundaries(t *testing.T) {
	// Elapsed time (measured from the envelope's creation), priority, pace
	// and the QA envelope carry to every descendant: they share the record.
	h := newHarness(t)
	p := &fsmpb.Policy{Limits: &fsmpb.Budget{Turns: 5}, ContextCap: 100, Priority: "low", Pace: "slow", QaEnvelope: "qa-1"}
	wantErr(t, h.apply1(at(t0+3, createPolicy("s1", p))), "")
	created := h.envelope("s1")
	c := ChildSessionID("s1", "p")
	wantErr(t, h.apply1(clearCmd("s1", "clear", "", "", "p")), "")
	wantErr(t, h.apply1(forkCmd(c, 0, "f1", "")), "")
	wantErr(t, h.apply1(clearCmd("f1", "new", "", "", "q")), "")
	for _, id := range []string{c, "f1", ChildSessionID("f1", "q")} {
		s := h.session(id)
		if s.EnvelopeId != "s1" || s.ContextCap != 100 {
			t.Fatalf("%s: envelope %q cap %d", id, s.EnvelopeId, s.ContextCap)
		}
	}
	e := h.envelope("s1")
	if e.CreatedUnixNano != t0+3 || e.Priority != "low" || e.Pace != "slow" || e.QaEnvelope != "qa-1" ||
		!proto.Equal(e.Limits, created.Limits) || e.Sessions != 4 {
		t.Fatalf("envelope after boundaries %v, at creation %v", e, created)
	}
	if _, err := h.f.Envelope(c); ReasonOf(err) != ReasonNotFound {
		t.Fatalf("a child got an envelope of its own: %v", err)
	}
}

func TestContextAxisRearmedByClear(t *testing.T) {
	// The context axis is the one that becomes fresh at a clear: the
	// provider really started a new context window.
	for _, source := range []string{"clear", "new"} {
		t.Run(source, func(t *testing.T) {
			const capTokens = 1000
			h := newHarness(t)
			wantErr(t, h.apply1(createPolicy("s1", budgetPolicy(nil, capTokens))), "")
			wantErr(t, h.apply1(contextUse("s1", capTokens-1)), "")
			wantErrMsg(t, h.apply1(contextUse("s1", 2)), ReasonBudgetExhausted, "context_tokens")

			child := ChildSessionID("s1", "p")
			c := wantBoundary(t, h.apply1(clearCmd("s1", source, "", "", "p")), source, child, "s1")
			if c.ContextCap != capTokens || c.ContextUsed != 0 {
				t.Fatalf("child context %d/%d, want 0/%d", c.ContextUsed, c.ContextCap, capTokens)
			}
			wantErr(t, h.apply1(contextUse(child, capTokens)), "")
			wantErrMsg(t, h.apply1(contextUse(child, 1)), ReasonBudgetExhausted, "context_tokens budget of session "+child)
			if p := h.session("s1"); p.ContextUsed != capTokens-1 {
				t.Fatalf("the parent's record changed: context used %d", p.ContextUsed)
			}
			if e := h.envelope("s1"); e.Refusals != 2 {
				t.Fatalf("refusals %d, want 2", e.Refusals)
			}
		})
	}
}

func TestForkSharesEnvelope(t *testing.T) {
	h := newHarness(t)
	wantErr(t, h.apply1(createPolicy("s1", budgetPolicy(&fsmpb.Budget{SpendMicros: 100}, 0))), "")
	wantErr(t, h.apply1(spend("s1", 95)), "")
	wantBoundary(t, h.apply1(forkCmd("s1", 0, "f1", "")), "fork", "f1", "s1")

	wantErr(t, h.apply1(spend("f1", 10)), ReasonBudgetExhausted)
	// Source and fork draw from one envelope, both still running.
	wantErr(t, h.apply1(spend("f1", 3)), "")
	wantErr(t, h.apply1(spend("s1", 2)), "")
	wantErr(t, h.apply1(spend("s1", 1)), ReasonBudgetExhausted)
	wantErr(t, h.apply1(spend("f1", 1)), ReasonBudgetExhausted)
	h.wantUsed("s1", &fsmpb.Budget{SpendMicros: 100})
	if e := h.envelope("s1"); e.Refusals != 3 || e.Sessions != 2 {
		t.Fatalf("refusals %d sessions %d, want 3, 2", e.Refusals, e.Sessions)
	}
	if h.countKind("s1", KindBudgetExhausted) != 1 || h.countKind("f1", KindBudgetExhausted) != 2 {
		t.Fatal("refusals journaled on the wrong session")
	}
}

func TestResetAndFreshKeepEnvelope(t *testing.T) {
	for _, op := range []string{"reset", "fresh"} {
		t.Run(op, func(t *testing.T) {
			h := newHarness(t)
			wantErr(t, h.apply1(createPolicy("s1", budgetPolicy(&fsmpb.Budget{SpendMicros: 100}, 1000))), "")
			wantErr(t, h.apply1(recordUsage("s1", &fsmpb.Budget{SpendMicros: 95}, 999)), "")
			c := reset("s1", "p")
			if op == "fresh" {
				c = fresh("s1", "p")
			}
			wantBoundary(t, h.apply1(c), op, "s1", "")

			wantErr(t, h.apply1(spend("s1", 10)), ReasonBudgetExhausted)
			wantErr(t, h.apply1(spend("s1", 5)), "")
			h.wantUsed("s1", &fsmpb.Budget{SpendMicros: 100})
			if op == "reset" {
				// Re-armed: the context rebuilds after the boundary.
				wantErr(t, h.apply1(contextUse("s1", 1000)), "")
			} else {
				// Unchanged: fresh keeps the conversation, so its context.
				wantErr(t, h.apply1(contextUse("s1", 2)), ReasonBudgetExhausted)
				wantErr(t, h.apply1(contextUse("s1", 1)), "")
			}
			if s := h.session("s1"); s.ContextUsed != 1000 {
				t.Fatalf("context used %d, want 1000", s.ContextUsed)
			}
			if e := h.envelope("s1"); e.Sessions != 1 {
				t.Fatalf("%s changed the envelope's sessions to %d", op, e.Sessions)
			}
		})
	}
}

func TestBudgetExhaustedOnEveryAxis(t *testing.T) {
	// Each axis is checked on its own, and the refusal names it.
	for _, axis := range budgetAxes {
		t.Run(axis, func(t *testing.T) {
			h := newHarness(t)
			lim := &fsmpb.Budget{Turns: 100, OutputTokens: 100, Queries: 100, SpendMicros: 100, ToolCalls: 100}
			wantErr(t, h.apply1(createPolicy("s1", budgetPolicy(lim, 0))), "")
			wantErr(t, h.apply1(recordUsage("s1", axisBudget(axis, 100), 0)), "")
			for _, other := range budgetAxes {
				if other == axis {
					continue
				}
				// A charge that starts a call (a turn, a query) is refused
				// once any axis is used up (MayStart), naming that axis;
				// other usage within its own limit is still counted.
				var want Reason
				if other == "turns" || other == "queries" {
					want = ReasonBudgetExhausted
				}
				wantErr(t, h.apply1(recordUsage("s1", axisBudget(other, 1), 0)), want)
			}
			r := h.apply1(recordUsage("s1", axisBudget(axis, 1), 0))
			wantErrMsg(t, r, ReasonBudgetExhausted, fmt.Sprintf("%s budget of session s1", axis))
		})
	}
}

// A charge stamped below BudgetStartRules (a leader whose voters do not
// all apply them yet) applies the rules before, on every replica alike:
// the charged axes alone decide, and no unmetered late charge.
func TestBudgetStartRulesOnlyFromTheirVersion(t *testing.T) {
	h := newHarness(t)
	wantErr(t, h.apply1(createPolicy("s1", budgetPolicy(&fsmpb.Budget{OutputTokens: 7}, 0))), "")
	wantErr(t, h.apply1(recordUsage("s1", &fsmpb.Budget{OutputTokens: 7}, 0)), "")
	old := recordUsage("s1", &fsmpb.Budget{Queries: 1}, 0)
	old.RuleVersion = 1
	wantErr(t, h.apply1(old), "")
	late := recordUsage("s1", &fsmpb.Budget{Queries: 1}, 0)
	late.RuleVersion, late.GetRecordUsage().Unmetered = 1, "UNAVAILABLE"
	wantErr(t, h.apply1(late), "")
	if d := h.eventData("s1", h.session("s1").HeadSeq); d["unmetered"] != nil {
		t.Fatalf("a version 1 charge journaled unmetered: %v", d)
	}
	// From the version on, the call start is refused.
	wantErr(t, h.apply1(recordUsage("s1", &fsmpb.Budget{Queries: 1}, 0)), ReasonBudgetExhausted)
}
