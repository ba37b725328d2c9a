package placement

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Candidate is one possible destination.
type Candidate struct {
	Record *fsmpb.NodeRecord
	// Status is the node's gossip status: alive, suspect, dead, left.
	Status string
	// Load is the number of active sessions placed on the node.
	Load int
}

// Request is what is being placed.
type Request struct {
	Session  *fsmpb.Session
	Envelope *fsmpb.Envelope
	// Target: the requested placement; empty fields keep the session's.
	Target *fsmpb.Placement
	// RequiredLabels the destination must carry (policy constraints).
	RequiredLabels map[string]string
	// AcceptDegradation admits a destination that changes the model,
	// provider, account or provider runtime (the degradation is disclosed
	// either way).
	AcceptDegradation bool
	// ContextTokens estimates the context a new provider conversation is
	// rebuilt from (the journal since the last reset), asked only when a
	// move loses the provider's; nil: not said.
	ContextTokens func() uint64
}

// Check is one admission check and its outcome.
type Check struct {
	Name   string // alive, not_draining, capacity, adapter, provider, model, account_ref, budget, labels, degradation
	OK     bool
	Reason string // why it failed
}

// Decision is the admission result for one node.
type Decision struct {
	Node      string
	Placement *fsmpb.Placement // the placement the new epoch would run with
	Checks    []Check
	// Degradation discloses what the change costs: a different model or
	// provider (tools, context size, cold cache).
	Degradation []string
}

// Admitted reports whether every check passed.
func (d Decision) Admitted() bool {
	for _, c := range d.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// Passed and Failed list check names / reasons for journaling and errors.
func (d Decision) Passed() []string {
	var out []string
	for _, c := range d.Checks {
		if c.OK {
			out = append(out, c.Name)
		}
	}
	return out
}

// Refusal names every failed check in one line ("" when admitted).
func (d Decision) Refusal() string {
	var out []string
	for _, c := range d.Checks {
		if !c.OK {
			out = append(out, c.Name+": "+c.Reason)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return d.Node + " refused: " + strings.Join(out, "; ")
}

// Resolve fills the empty fields of target from the session's placement.
func Resolve(current, target *fsmpb.Placement, node string) *fsmpb.Placement {
	p := &fsmpb.Placement{
		RuntimeAdapter: current.GetRuntimeAdapter(), Provider: current.GetProvider(),
		AccountRef: current.GetAccountRef(), Model: current.GetModel(), Node: node,
	}
	if t := target; t != nil {
		if t.RuntimeAdapter != "" {
			p.RuntimeAdapter = t.RuntimeAdapter
		}
		if t.Provider != "" {
			p.Provider = t.Provider
		}
		if t.AccountRef != "" {
			p.AccountRef = t.AccountRef
		}
		if t.Model != "" {
			p.Model = t.Model
		}
	}
	return p
}

// Admit runs every check of req against one candidate.
func Admit(req Request, c Candidate) Decision {
	rec := c.Record
	p := Resolve(req.Session.GetPlacement(), req.Target, rec.GetName())
	d := Decision{Node: rec.GetName(), Placement: p}
	add := func(name string, ok bool, format string, args ...any) {
		ch := Check{Name: name, OK: ok}
		if !ok {
			ch.Reason = fmt.Sprintf(format, args...)
		}
		d.Checks = append(d.Checks, ch)
	}
	add("alive", c.Status == "alive", "gossip says %s", c.Status)
	add(fsm.CheckNotDraining, !rec.GetDraining(), fsm.WhyDraining)
	add("capacity", rec.GetCapacity() == 0 || c.Load < int(rec.GetCapacity()), "hosts %d of %d sessions", c.Load, rec.GetCapacity())
	add("adapter", slices.Contains(rec.GetRuntimeAdapters(), p.RuntimeAdapter), "no runtime adapter %q", p.RuntimeAdapter)
	add("provider", p.Provider == "" || slices.Contains(rec.GetProviders(), p.Provider), "no provider %q", p.Provider)
	add("model", p.Model == "" || slices.Contains(rec.GetModels(), p.Model), "no model %q", p.Model)
	add("account_ref", p.AccountRef == "" || slices.Contains(rec.GetAccountRefs(), p.AccountRef), "cannot resolve account ref %q", p.AccountRef)
	if exhausted := exhaustedAxis(req.Envelope); exhausted != "" {
		add("budget", false, "%s budget exhausted", exhausted)
	} else {
		add("budget", true, "")
	}
	if missing := missingLabels(rec, req.RequiredLabels); len(missing) > 0 {
		add("labels", false, "missing %s", strings.Join(missing, ", "))
	} else {
		add("labels", true, "")
	}
	d.Degradation = degradation(req, p)
	add("degradation", len(d.Degradation) == 0 || req.AcceptDegradation, "the move degrades the session; accept it explicitly")
	return d
}

// Choose admits req on the named node, or, when the target names none, on
// the least loaded admitted node other than the current one (ties by name).
// It returns the chosen decision and every decision made (for a refusal
// that names every failed check).
func Choose(req Request, cands []Candidate) (Decision, []Decision, bool) {
	want := req.Target.GetNode()
	current := req.Session.GetPlacement().GetNode()
	sorted := slices.Clone(cands)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Load != sorted[j].Load {
			return sorted[i].Load < sorted[j].Load
		}
		return sorted[i].Record.GetName() < sorted[j].Record.GetName()
	})
	var all []Decision
	for _, c := range sorted {
		name := c.Record.GetName()
		if want != "" && name != want {
			continue
		}
		if want == "" && name == current {
			continue
		}
		d := Admit(req, c)
		all = append(all, d)
		if d.Admitted() {
			return d, all, true
		}
	}
	return Decision{}, all, false
}

// Refusals joins every decision's refusal, or explains that no node fits.
func Refusals(target string, all []Decision) string {
	if len(all) == 0 {
		if target != "" {
			return "no node record for " + target
		}
		return "no other node to move to"
	}
	var out []string
	for _, d := range all {
		out = append(out, d.Refusal())
	}
	return strings.Join(out, " | ")
}

// exhaustedAxis names the first axis of e that is used up — the FSM's own
// rule (fsm.MayStart), every axis included — by the name a refusal shows.
func exhaustedAxis(e *fsmpb.Envelope) string {
	if e == nil {
		return ""
	}
	axis := fsm.MayStart(e, nil)
	if axis == "spend_micros" {
		return "spend" // a refusal speaks of the spend, not its unit
	}
	return axis
}

func missingLabels(rec *fsmpb.NodeRecord, want map[string]string) []string {
	have := map[string]string{}
	for _, l := range rec.GetLabels() {
		have[l.Key] = l.Value
	}
	var missing []string
	for k, v := range want {
		if have[k] != v {
			missing = append(missing, k+"="+v)
		}
	}
	slices.Sort(missing)
	return missing
}

// degradation discloses what moving the session to placement p loses
// (DESIGN.md §8): a different model, provider or account starts the
// provider's cache cold; a different provider runtime cannot continue the
// provider thread the session holds. Where the provider's conversation is
// lost it says how much context is rebuilt from the journal.
func degradation(req Request, p *fsmpb.Placement) []string {
	s, cur := req.Session, req.Session.GetPlacement()
	var out []string
	if p.Model != cur.GetModel() {
		out = append(out, fmt.Sprintf("model %q → %q: tools and context size may differ; the provider cache starts cold", cur.GetModel(), p.Model))
	}
	if p.Provider != cur.GetProvider() {
		out = append(out, fmt.Sprintf("provider %q → %q: a new provider conversation; the cache starts cold", cur.GetProvider(), p.Provider))
	}
	if p.AccountRef != cur.GetAccountRef() {
		out = append(out, fmt.Sprintf("account %q → %q: the provider cache starts cold", cur.GetAccountRef(), p.AccountRef))
	}
	threadLost := s.GetProviderThread() && p.RuntimeAdapter != cur.GetRuntimeAdapter()
	if threadLost {
		out = append(out, fmt.Sprintf("runtime %q → %q: %s thread %s cannot follow", cur.GetRuntimeAdapter(), p.RuntimeAdapter, s.GetProvider(), s.GetProviderSessionId()))
	}
	if len(out) > 0 && req.ContextTokens != nil && (threadLost || p.Provider != cur.GetProvider() || p.Model != cur.GetModel()) {
		out = append(out, fmt.Sprintf("cold cache; context rebuilt from the journal (~%d tokens)", req.ContextTokens()))
	}
	return out
}
