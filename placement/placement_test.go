package placement

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The session every test places: echo, anthropic, account a, opus, on n1.
func session() *fsmpb.Session {
	return &fsmpb.Session{SessionId: "s1", Placement: &fsmpb.Placement{
		RuntimeAdapter: "echo", Provider: "anthropic", AccountRef: "acct-a", Model: "opus", Node: "n1",
	}}
}

// node is a record that supports the session's placement, with room.
func node(name string) *fsmpb.NodeRecord {
	return &fsmpb.NodeRecord{
		Name: name, Capacity: 10,
		RuntimeAdapters: []string{"echo", "exec"}, Providers: []string{"anthropic", "openai"},
		Models: []string{"opus", "haiku", "gpt"}, AccountRefs: []string{"acct-a"},
		Labels: []*fsmpb.Label{{Key: "zone", Value: "eu"}},
	}
}

func alive(name string, load int) Candidate {
	return Candidate{Record: node(name), Status: "alive", Load: load}
}

func envelope(limits, used *fsmpb.Budget) *fsmpb.Envelope {
	return &fsmpb.Envelope{EnvelopeId: "s1", Limits: limits, Used: used}
}

// allChecks is every check Admit runs, in its order.
var allChecks = []string{"alive", "not_draining", "capacity", "adapter", "provider", "model", "account_ref", "budget", "labels", "degradation"}

func TestAdmitAllChecksPass(t *testing.T) {
	req := Request{Session: session(), Envelope: envelope(&fsmpb.Budget{SpendMicros: 1000}, &fsmpb.Budget{SpendMicros: 999}),
		RequiredLabels: map[string]string{"zone": "eu"}}
	d := Admit(req, alive("n2", 3))
	if !d.Admitted() || d.Refusal() != "" || d.Node != "n2" || len(d.Degradation) != 0 {
		t.Fatalf("decision %+v, refusal %q: want admitted", d, d.Refusal())
	}
	if got := d.Passed(); !slices.Equal(got, allChecks) {
		t.Fatalf("passed %q, want every check %q", got, allChecks)
	}
	want := &fsmpb.Placement{RuntimeAdapter: "echo", Provider: "anthropic", AccountRef: "acct-a", Model: "opus", Node: "n2"}
	if !proto.Equal(d.Placement, want) {
		t.Fatalf("placement %v, want the session's on n2: %v", d.Placement, want)
	}
}

// TestAdmitRefusals changes one thing at a time and wants exactly the
// named checks to fail, with the refusal's wording.
func TestAdmitRefusals(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Request, *Candidate)
		refusal string // "" = admitted
	}{
		{"suspect in gossip", func(_ *Request, c *Candidate) { c.Status = "suspect" }, "n2 refused: alive: gossip says suspect"},
		{"dead in gossip", func(_ *Request, c *Candidate) { c.Status = "dead" }, "n2 refused: alive: gossip says dead"},
		{"left gossip", func(_ *Request, c *Candidate) { c.Status = "left" }, "n2 refused: alive: gossip says left"},
		{"no gossip status", func(_ *Request, c *Candidate) { c.Status = "" }, "n2 refused: alive: gossip says "},
		{"draining", func(_ *Request, c *Candidate) { c.Record.Draining = true }, "n2 refused: not_draining: the node is draining"},
		{"full", func(_ *Request, c *Candidate) { c.Load = 10 }, "n2 refused: capacity: hosts 10 of 10 sessions"},
		{"over full", func(_ *Request, c *Candidate) { c.Load = 12 }, "n2 refused: capacity: hosts 12 of 10 sessions"},
		{"one slot left", func(_ *Request, c *Candidate) { c.Load = 9 }, ""},
		{"capacity 0 is unlimited", func(_ *Request, c *Candidate) { c.Record.Capacity = 0; c.Load = 5000 }, ""},
		{"no such adapter", func(r *Request, _ *Candidate) { r.Target = &fsmpb.Placement{RuntimeAdapter: "claude"} },
			`n2 refused: adapter: no runtime adapter "claude"`},
		{"adapter of the session missing", func(_ *Request, c *Candidate) { c.Record.RuntimeAdapters = []string{"exec"} },
			`n2 refused: adapter: no runtime adapter "echo"`},
		{"no such provider", func(_ *Request, c *Candidate) { c.Record.Providers = nil },
			`n2 refused: provider: no provider "anthropic"`},
		{"no provider needed", func(r *Request, c *Candidate) { r.Session.Placement.Provider = ""; c.Record.Providers = nil }, ""},
		{"no such model", func(_ *Request, c *Candidate) { c.Record.Models = []string{"haiku"} }, `n2 refused: model: no model "opus"`},
		{"no model needed", func(r *Request, c *Candidate) { r.Session.Placement.Model = ""; c.Record.Models = nil }, ""},
		{"account ref unresolvable", func(_ *Request, c *Candidate) { c.Record.AccountRefs = []string{"acct-b"} },
			`n2 refused: account_ref: cannot resolve account ref "acct-a"`},
		{"target account ref", func(r *Request, _ *Candidate) { r.Target = &fsmpb.Placement{AccountRef: "acct-z"} },
			`n2 refused: account_ref: cannot resolve account ref "acct-z"; degradation: the move degrades the session; accept it explicitly`},
		{"no account ref needed", func(r *Request, c *Candidate) { r.Session.Placement.AccountRef = ""; c.Record.AccountRefs = nil }, ""},
		{"spend exhausted", func(r *Request, _ *Candidate) {
			r.Envelope = envelope(&fsmpb.Budget{SpendMicros: 1000}, &fsmpb.Budget{SpendMicros: 1000})
		}, "n2 refused: budget: spend budget exhausted"},
		{"turns before spend", func(r *Request, _ *Candidate) {
			r.Envelope = envelope(&fsmpb.Budget{Turns: 3, SpendMicros: 10}, &fsmpb.Budget{Turns: 3, SpendMicros: 10})
		}, "n2 refused: budget: turns budget exhausted"},
		{"output tokens exhausted", func(r *Request, _ *Candidate) {
			r.Envelope = envelope(&fsmpb.Budget{OutputTokens: 5}, &fsmpb.Budget{OutputTokens: 7})
		}, "n2 refused: budget: output_tokens budget exhausted"},
		{"queries exhausted", func(r *Request, _ *Candidate) {
			r.Envelope = envelope(&fsmpb.Budget{Queries: 1}, &fsmpb.Budget{Queries: 1})
		}, "n2 refused: budget: queries budget exhausted"},
		{"tool calls exhausted", func(r *Request, _ *Candidate) {
			r.Envelope = envelope(&fsmpb.Budget{ToolCalls: 2}, &fsmpb.Budget{ToolCalls: 2})
		}, "n2 refused: budget: tool_calls budget exhausted"},
		{"limit 0 is unlimited", func(r *Request, _ *Candidate) {
			r.Envelope = envelope(&fsmpb.Budget{}, &fsmpb.Budget{SpendMicros: 1 << 40})
		}, ""},
		{"no envelope", func(r *Request, _ *Candidate) { r.Envelope = nil }, ""},
		{"missing label", func(r *Request, _ *Candidate) { r.RequiredLabels = map[string]string{"zone": "us"} },
			"n2 refused: labels: missing zone=us"},
		{"missing labels, sorted", func(r *Request, _ *Candidate) {
			r.RequiredLabels = map[string]string{"zone": "eu", "tier": "gpu", "arch": "arm"}
		}, "n2 refused: labels: missing arch=arm, tier=gpu"},
		{"model change not accepted", func(r *Request, _ *Candidate) { r.Target = &fsmpb.Placement{Model: "haiku"} },
			"n2 refused: degradation: the move degrades the session; accept it explicitly"},
		{"model change accepted", func(r *Request, _ *Candidate) {
			r.Target = &fsmpb.Placement{Model: "haiku"}
			r.AcceptDegradation = true
		}, ""},
		{"everything wrong at once", func(r *Request, c *Candidate) {
			c.Status, c.Record.Draining, c.Load = "dead", true, 10
			r.Envelope = envelope(&fsmpb.Budget{Turns: 1}, &fsmpb.Budget{Turns: 1})
		}, "n2 refused: alive: gossip says dead; not_draining: the node is draining; capacity: hosts 10 of 10 sessions; budget: turns budget exhausted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := Request{Session: session(), Envelope: envelope(&fsmpb.Budget{SpendMicros: 1000}, &fsmpb.Budget{SpendMicros: 10})}
			c := alive("n2", 3)
			tt.change(&req, &c)
			d := Admit(req, c)
			if got := d.Refusal(); got != tt.refusal {
				t.Fatalf("refusal %q, want %q", got, tt.refusal)
			}
			if d.Admitted() != (tt.refusal == "") {
				t.Fatalf("admitted %v with refusal %q", d.Admitted(), d.Refusal())
			}
			// Every check is reported, passed or failed, in the same order.
			var names []string
			for _, ch := range d.Checks {
				names = append(names, ch.Name)
				if ch.OK != (ch.Reason == "") {
					t.Fatalf("check %+v: a reason exactly when it failed", ch)
				}
			}
			if !slices.Equal(names, allChecks) {
				t.Fatalf("checks %q, want %q", names, allChecks)
			}
		})
	}
}

// TestAdmitDisclosesDegradation: a model or provider change is disclosed
// whether or not the move accepted it; nothing else is a degradation.
func TestAdmitDisclosesDegradation(t *testing.T) {
	tests := []struct {
		target *fsmpb.Placement
		want   []string
	}{
		{nil, nil},
		{&fsmpb.Placement{Model: "opus", Provider: "anthropic"}, nil},
		{&fsmpb.Placement{RuntimeAdapter: "exec", Node: "n9"}, nil}, // another adapter is no degradation
		{&fsmpb.Placement{Model: "haiku"}, []string{
			`model "opus" → "haiku": tools and context size may differ; the provider cache starts cold`}},
		{&fsmpb.Placement{Provider: "openai", Model: "gpt"}, []string{
			`model "opus" → "gpt": tools and context size may differ; the provider cache starts cold`,
			`provider "anthropic" → "openai": a new provider conversation; the cache starts cold`}},
	}
	for _, tt := range tests {
		for _, accept := range []bool{false, true} {
			d := Admit(Request{Session: session(), Target: tt.target, AcceptDegradation: accept}, alive("n2", 0))
			if !slices.Equal(d.Degradation, tt.want) {
				t.Errorf("target %v accept=%v: degradation %q, want %q", tt.target, accept, d.Degradation, tt.want)
			}
			if wantOK := len(tt.want) == 0 || accept; d.Admitted() != wantOK {
				t.Errorf("target %v accept=%v: admitted %v, want %v (%s)", tt.target, accept, d.Admitted(), wantOK, d.Refusal())
			}
		}
	}
}

func TestResolve(t *testing.T) {
	cur := session().Placement
	if got := Resolve(cur, nil, "n3"); !proto.Equal(got, &fsmpb.Placement{RuntimeAdapter: "echo", Provider: "anthropic", AccountRef: "acct-a", Model: "opus", Node: "n3"}) {
		t.Fatalf("no target: %v", got)
	}
	// Every non-empty target member wins; the node is always the candidate's,
	// whatever the target names.
	target := &fsmpb.Placement{RuntimeAdapter: "exec", Provider: "openai", AccountRef: "acct-b", Model: "gpt", Node: "n9"}
	if got := Resolve(cur, target, "n3"); !proto.Equal(got, &fsmpb.Placement{RuntimeAdapter: "exec", Provider: "openai", AccountRef: "acct-b", Model: "gpt", Node: "n3"}) {
		t.Fatalf("full target: %v", got)
	}
	if got := Resolve(nil, &fsmpb.Placement{Model: "gpt"}, "n3"); !proto.Equal(got, &fsmpb.Placement{Model: "gpt", Node: "n3"}) {
		t.Fatalf("no current placement: %v", got)
	}
}

func names(ds []Decision) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Node)
	}
	return out
}

func TestChoose(t *testing.T) {
	full := alive("n2", 10)
	draining := alive("n4", 0)
	draining.Record.Draining = true
	tests := []struct {
		name    string
		target  string
		cands   []Candidate
		chosen  string   // "" = none admitted
		tried   []string // the decisions made, in order
		refusal string   // Refusals(target, tried) when none is admitted
	}{
		{"least loaded other than the current node", "",
			[]Candidate{alive("n1", 0), alive("n2", 5), alive("n3", 2), alive("n4", 9)}, "n3", []string{"n3"}, ""},
		{"ties by name", "",
			[]Candidate{alive("n5", 1), alive("n3", 1), alive("n4", 1)}, "n3", []string{"n3"}, ""},
		{"refused candidates are passed over, in load order", "",
			[]Candidate{full, draining, alive("n3", 4)}, "n3", []string{"n4", "n3"}, ""},
		{"none admitted: every decision, in load order", "",
			[]Candidate{alive("n1", 0), full, draining}, "", []string{"n4", "n2"},
			"n4 refused: not_draining: the node is draining | n2 refused: capacity: hosts 10 of 10 sessions"},
		{"only the current node", "", []Candidate{alive("n1", 0)}, "", nil, "no other node to move to"},
		{"no candidates", "", nil, "", nil, "no other node to move to"},
		{"a named node only, however loaded", "n2",
			[]Candidate{alive("n3", 0), alive("n2", 7)}, "n2", []string{"n2"}, ""},
		{"a named node refused: no fallback", "n2",
			[]Candidate{alive("n3", 0), full}, "", []string{"n2"}, "n2 refused: capacity: hosts 10 of 10 sessions"},
		{"a named node without a record", "n9",
			[]Candidate{alive("n3", 0)}, "", nil, "no node record for n9"},
		{"the current node, when named, is considered", "n1",
			[]Candidate{alive("n1", 0), alive("n2", 0)}, "n1", []string{"n1"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := Request{Session: session()}
			if tt.target != "" {
				req.Target = &fsmpb.Placement{Node: tt.target}
			}
			before := names(decide(tt.cands))
			d, all, ok := Choose(req, tt.cands)
			if ok != (tt.chosen != "") || d.Node != tt.chosen {
				t.Fatalf("chose %q (ok %v), want %q", d.Node, ok, tt.chosen)
			}
			if ok && (!d.Admitted() || d.Placement.Node != tt.chosen) {
				t.Fatalf("chosen decision %+v is not an admission on %s", d, tt.chosen)
			}
			if got := names(all); !slices.Equal(got, tt.tried) {
				t.Fatalf("decisions on %q, want %q", got, tt.tried)
			}
			if !ok {
				if got := Refusals(tt.target, all); got != tt.refusal {
					t.Fatalf("Refusals = %q, want %q", got, tt.refusal)
				}
			}
			if after := names(decide(tt.cands)); !slices.Equal(after, before) {
				t.Fatalf("Choose reordered its input: %q, was %q", after, before)
			}
		})
	}
}

// decide lists the candidates' names as decisions, to compare orders.
func decide(cands []Candidate) []Decision {
	var out []Decision
	for _, c := range cands {
		out = append(out, Decision{Node: c.Record.GetName()})
	}
	return out
}

func TestRefusalsJoinsEveryDecision(t *testing.T) {
	a := Admit(Request{Session: session()}, Candidate{Record: node("n2"), Status: "dead"})
	b := Admit(Request{Session: session()}, Candidate{Record: node("n3"), Status: "alive", Load: 10})
	got := Refusals("", []Decision{a, b})
	if want := "n2 refused: alive: gossip says dead | n3 refused: capacity: hosts 10 of 10 sessions"; got != want {
		t.Fatalf("Refusals = %q, want %q", got, want)
	}
}

// What a move loses is disclosed before it commits: a provider thread a
// new runtime cannot follow, an account's cold cache, and how much context
// a new conversation is rebuilt from.
func TestDegradationDisclosesTheLostThread(t *testing.T) {
	s := session()
	s.Placement.RuntimeAdapter, s.Provider, s.ProviderSessionId, s.ProviderThread = "claude", "claude", "t-1", true
	req := Request{Session: s, Target: &fsmpb.Placement{RuntimeAdapter: "codex"}, ContextTokens: func() uint64 { return 1234 }}
	c := alive("n2", 3)
	c.Record.RuntimeAdapters = append(c.Record.RuntimeAdapters, "codex")
	d := Admit(req, c)
	want := []string{`runtime "claude" → "codex": claude thread t-1 cannot follow`, "cold cache; context rebuilt from the journal (~1234 tokens)"}
	if !slices.Equal(d.Degradation, want) || d.Admitted() {
		t.Fatalf("degradation %q (admitted %v), want %q and not admitted without acceptance", d.Degradation, d.Admitted(), want)
	}
	req.AcceptDegradation = true
	if d := Admit(req, c); !d.Admitted() {
		t.Fatalf("accepted: %s", d.Refusal())
	}
}
