package fsm

import (
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Budget envelopes (DESIGN.md §5): turns, output tokens, queries, spend and
// tool calls are counted in an envelope shared by a whole lineage, so a
// clear, new, fork, reset or fresh never buys a new allowance. Only the
// context axis belongs to one logical session and is re-armed when the
// provider really starts a fresh context window.

func (a *applier) loadEnvelope(id string) *fsmpb.Envelope {
	raw := a.envs.Get([]byte(id))
	if raw == nil {
		return nil
	}
	var e fsmpb.Envelope
	if err := proto.Unmarshal(raw, &e); err != nil {
		panic("fsm: corrupt envelope " + id + ": " + err.Error())
	}
	return &e
}

func (a *applier) putEnvelope(e *fsmpb.Envelope) {
	buf, err := proto.Marshal(e)
	if err != nil {
		panic("fsm: marshal envelope: " + err.Error())
	}
	a.must(a.envs.Put([]byte(e.EnvelopeId), buf))
}

// newEnvelope creates the envelope of a new root session.
func (a *applier) newEnvelope(c *fsmpb.Command, id string, p *fsmpb.Policy) *fsmpb.Envelope {
	e := &fsmpb.Envelope{EnvelopeId: id, Limits: &fsmpb.Budget{}, Used: &fsmpb.Budget{},
		CreatedUnixNano: c.TimeUnixNano, Sessions: 1}
	if p != nil {
		if p.Limits != nil {
			e.Limits = proto.Clone(p.Limits).(*fsmpb.Budget)
		}
		e.Priority, e.Pace, e.QaEnvelope = p.Priority, p.Pace, p.QaEnvelope
	}
	a.putEnvelope(e)
	return e
}

// overLimit names the first axis that used+add would push past its limit
// (0 = unlimited), or "".
func overLimit(limits, used, add *fsmpb.Budget) string {
	axes := [...]struct {
		name              string
		limit, used, plus uint64
	}{
		{"turns", limits.GetTurns(), used.GetTurns(), add.GetTurns()},
		{"output_tokens", limits.GetOutputTokens(), used.GetOutputTokens(), add.GetOutputTokens()},
		{"queries", limits.GetQueries(), used.GetQueries(), add.GetQueries()},
		{"spend_micros", limits.GetSpendMicros(), used.GetSpendMicros(), add.GetSpendMicros()},
		{"tool_calls", limits.GetToolCalls(), used.GetToolCalls(), add.GetToolCalls()},
		{"input_tokens", limits.GetInputTokens(), used.GetInputTokens(), add.GetInputTokens()},
	}
	for _, x := range axes {
		if x.limit > 0 && x.used+x.plus > x.limit {
			return x.name
		}
	}
	return ""
}

func addBudget(used, add *fsmpb.Budget) {
	used.Turns += add.GetTurns()
	used.OutputTokens += add.GetOutputTokens()
	used.Queries += add.GetQueries()
	used.SpendMicros += add.GetSpendMicros()
	used.ToolCalls += add.GetToolCalls()
	used.InputTokens += add.GetInputTokens()
}

// recordUsage charges one model request. A charge that would pass a hard
// limit is refused with BUDGET_EXHAUSTED, and the refusal itself is
// journaled (budget.exhausted), so the audit trail shows it.
func (a *applier) recordUsage(c *fsmpb.Command, cmd *fsmpb.RecordUsage) (*fsmpb.Result, *Error) {
	id := cmd.SessionId
	if id == "" {
		if cmd.LaunchId == "" {
			return nil, errorf(ReasonInvalidArgument, "a trace id (session) or a launch is required")
		}
		l, err := a.loadLaunch(cmd.LaunchId)
		if err != nil {
			return nil, err
		}
		id = l.DefaultSession
	}
	s, err := a.loadSession(id)
	if err != nil {
		return nil, err
	}
	unmetered := cmd.Unmetered
	if c.RuleVersion < BudgetStartRules {
		unmetered = "" // the rules before: no late charges
	}
	if unmetered != "" && !cmd.Incurred {
		return nil, errorf(ReasonInvalidArgument, "an unmetered call's late charge is usage already incurred (incurred)")
	}
	// A late charge of a call a gateway could not charge when it ended
	// lands even on a session stopped since: the usage happened while it
	// ran, and is never dropped.
	if err := activeSession(s); err != nil && unmetered == "" {
		return nil, err
	}
	usage := cmd.Usage
	if usage == nil {
		usage = &fsmpb.Budget{}
	}
	var env *fsmpb.Envelope
	if cmd.Incurred {
		env, err = a.chargeIncurred(c, s, usage, cmd.ContextTokens, cmd.LaunchId, unmetered)
	} else {
		env, err = a.charge(c, s, usage, cmd.ContextTokens, cmd.LaunchId)
	}
	a.putSession(s)
	if err != nil {
		return nil, err
	}
	return &fsmpb.Result{Body: &fsmpb.Result_Envelope{Envelope: env}}, nil
}

// charge charges usage (and context tokens) to s's envelope and journals
// it on s (budget.charged), or, when it would pass a hard limit, journals
// the refusal (budget.exhausted), counts it and returns BUDGET_EXHAUSTED
// with nothing of it charged. The caller stores s.
func (a *applier) charge(c *fsmpb.Command, s *fsmpb.Session, usage *fsmpb.Budget, contextTokens uint64, viaLaunch string) (*fsmpb.Envelope, *Error) {
	env := a.loadEnvelope(s.EnvelopeId)
	if env == nil {
		return nil, errorf(ReasonNotFound, "session %s has no budget envelope", s.SessionId)
	}
	f := chargeFact{Usage: budgetFactOf(usage), ContextTokens: contextTokens, Envelope: env.EnvelopeId, ViaLaunch: viaLaunch}
	exhausted := ""
	if startsCall(usage) && c.RuleVersion >= BudgetStartRules {
		// A call starts only on an envelope with nothing used up, whatever
		// axis it charges first (one rule: MayStart).
		exhausted = MayStart(env, s)
	}
	if exhausted == "" {
		exhausted = overLimit(env.Limits, env.Used, usage)
	}
	if exhausted == "" && s.ContextCap > 0 && s.ContextUsed+contextTokens > s.ContextCap {
		exhausted = "context_tokens"
	}
	s.UpdatedUnixNano = c.TimeUnixNano
	if exhausted != "" {
		f.Exhausted = exhausted
		env.Refusals++
		a.putEnvelope(env)
		a.putEvents(newEvent(s, c, KindBudgetExhausted, "refused: "+exhausted+" exhausted", fact(f)))
		return nil, errorf(ReasonBudgetExhausted, "%s budget of session %s is exhausted", exhausted, s.SessionId)
	}
	addBudget(env.Used, usage)
	env.LastChargeUnixNano = c.TimeUnixNano
	a.putEnvelope(env)
	s.ContextUsed += contextTokens
	a.putEvents(newEvent(s, c, KindBudgetCharged, "", fact(f)))
	return env, nil
}

// chargeIncurred charges usage that already happened (a model call a
// gateway passed and the upstream answered): it is counted even when it
// passes a limit, because refusing it would hide real spend. Passing a
// limit journals the exhaustion next to the charge; the next admission
// (MayStart) refuses. unmetered, when set, says why the charge comes late
// (the gateway could not commit it when the call ended); the fact names it.
func (a *applier) chargeIncurred(c *fsmpb.Command, s *fsmpb.Session, usage *fsmpb.Budget, contextTokens uint64, viaLaunch, unmetered string) (*fsmpb.Envelope, *Error) {
	env := a.loadEnvelope(s.EnvelopeId)
	if env == nil {
		return nil, errorf(ReasonNotFound, "session %s has no budget envelope", s.SessionId)
	}
	f := chargeFact{Usage: budgetFactOf(usage), ContextTokens: contextTokens, Envelope: env.EnvelopeId, ViaLaunch: viaLaunch, Incurred: true, Unmetered: unmetered}
	over := overLimit(env.Limits, env.Used, usage)
	addBudget(env.Used, usage)
	env.LastChargeUnixNano = c.TimeUnixNano
	a.putEnvelope(env)
	s.ContextUsed += contextTokens
	s.UpdatedUnixNano = c.TimeUnixNano
	events := []*fsmpb.Event{newEvent(s, c, KindBudgetCharged, "", fact(f))}
	if over != "" {
		f.Exhausted = over
		events = append(events, newEvent(s, c, KindBudgetExhausted, over+" exhausted by usage already incurred", fact(f)))
	}
	a.putEvents(events...)
	return env, nil
}

// startsCall reports whether a charge (not incurred) is the start of a
// model call or a turn: it counts a query or a turn. The runner's turn
// start (turn and query, or the turn alone when a gateway meters the
// calls), a model runtime's query before each further call and a
// gateway's admission all are.
func startsCall(usage *fsmpb.Budget) bool {
	return usage.GetQueries() > 0 || usage.GetTurns() > 0
}

// MayStart is the one rule that decides whether a model call (or a turn)
// may start on env: it names the first axis used up (used >= a non-zero
// limit, on any axis, not only the one the start charges) or s's context
// axis, and "" when the call may start. The FSM applies it to every charge
// that starts a call (a query or a turn), so the leader decides with the
// committed state; a gateway's admission and placement read it on a
// replica first.
func MayStart(env *fsmpb.Envelope, s *fsmpb.Session) string {
	// One more of everything passes a limit exactly when it is used up.
	one := &fsmpb.Budget{Turns: 1, OutputTokens: 1, Queries: 1, SpendMicros: 1, ToolCalls: 1, InputTokens: 1}
	if axis := overLimit(env.GetLimits(), env.GetUsed(), one); axis != "" {
		return axis
	}
	if s.GetContextCap() > 0 && s.GetContextUsed() >= s.GetContextCap() {
		return "context_tokens"
	}
	return ""
}

// Limited reports whether env has a limit, or s a context cap, that could
// refuse a call: an envelope's limits are fixed when it is made, so one
// without any never refuses, whatever replica reads it.
func Limited(env *fsmpb.Envelope, s *fsmpb.Session) bool {
	l := env.GetLimits()
	return l.GetTurns() > 0 || l.GetOutputTokens() > 0 || l.GetQueries() > 0 || l.GetSpendMicros() > 0 ||
		l.GetToolCalls() > 0 || l.GetInputTokens() > 0 || s.GetContextCap() > 0
}
