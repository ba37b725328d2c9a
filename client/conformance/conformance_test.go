package conformance

import (
	"slices"
	"strings"
	"testing"
)

// states are every state the fleet's capability function (capability set
// version 4) gives a control, with the handoff; the corpus must hold each
// in some case, and trigger it as an action in some case. Every control
// is also PERMISSION_DENIED for a read token (permissionDenied).
var states = append([]string{
	"input.text available",
	"input.text unavailable SESSION_STOPPED → fakctl session describe ses_conf",
	"input.text unavailable EXTERNAL_RUNTIME → fakctl launch describe lch_conf",
	"input.text unavailable NOT_ATTACHED → attach",
	"input.text unavailable LEASE_NOT_HELD → lease.steal",
	"input.text unavailable LEASE_NOT_HELD → lease.take",
	"turn.interrupt available",
	"turn.interrupt unavailable SESSION_STOPPED → fakctl session describe ses_conf",
	"turn.interrupt unavailable EXTERNAL_RUNTIME → fakctl launch describe lch_conf",
	"turn.interrupt unavailable NOT_ATTACHED → attach",
	"turn.interrupt unavailable LEASE_NOT_HELD → lease.steal",
	"turn.interrupt unavailable LEASE_NOT_HELD → lease.take",
	"turn.interrupt unavailable NO_TURN_RUNNING",
	"lease.take available",
	"lease.take unavailable SESSION_STOPPED → fakctl session describe ses_conf",
	"lease.take unavailable NOT_ATTACHED → attach",
	"lease.take unavailable ALREADY_HELD → lease.release",
	"lease.take unavailable LEASE_HELD → lease.steal",
	"lease.release available",
	"lease.release unavailable NOT_ATTACHED → attach",
	"lease.release unavailable LEASE_NOT_HELD → lease.take",
	"lease.steal available",
	"lease.steal unavailable SESSION_STOPPED → fakctl session describe ses_conf",
	"lease.steal unavailable NOT_ATTACHED → attach",
	"lease.steal unavailable NOT_HELD_BY_OTHER → lease.take",
	"approval.answer available",
	"approval.answer unavailable NOT_ATTACHED → attach",
	"approval.answer unavailable NO_PENDING_APPROVAL",
	"approval.answer unavailable SESSION_STOPPED → fakctl session describe ses_conf",
	"session.stop available",
	"session.stop unavailable SESSION_STOPPED → fakctl session describe ses_conf",
	"session.fresh available",
	"session.fresh unavailable SESSION_STOPPED → fakctl session describe ses_conf",
	"session.reset available",
	"session.reset unavailable SESSION_STOPPED → fakctl session describe ses_conf",
	"session.reset unavailable BUSY",
	"session.clear available",
	"session.clear unavailable SESSION_STOPPED → fakctl session describe ses_conf",
	"session.new available",
	"session.new unavailable SESSION_STOPPED → fakctl session describe ses_conf",
	"session.fork available",
	"session.move available",
	"session.move unavailable SESSION_STOPPED → fakctl session describe ses_conf",
	"session.move unavailable BUSY → fakctl session move-status ses_conf",
	"session.move unavailable EXTERNAL_RUNTIME → fakctl launch describe lch_conf",
	"detach available",
	"detach unavailable NOT_ATTACHED → attach",
}, permissionDenied()...)

// permissionDenied is every control refused to a role that may not use
// it: all of them for a read token.
func permissionDenied() []string {
	var out []string
	for _, c := range []string{"input.text", "turn.interrupt", "lease.take", "lease.release", "lease.steal", "approval.answer",
		"session.stop", "session.fresh", "session.reset", "session.clear", "session.new", "session.fork", "session.move", "detach"} {
		out = append(out, c+" unavailable PERMISSION_DENIED")
	}
	return out
}

// TestCorpus: the corpus loads, is consistent (Parse), holds every state
// of every control and triggers each as an action somewhere, and has the
// case of a control no client knows.
func TestCorpus(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	held, acted := map[string]bool{}, map[string]bool{}
	unknown := false
	for i := range c.Cases {
		k := &c.Cases[i]
		for _, w := range k.Wants() {
			s := w.Control + " " + w.String()
			held[s] = true
			if slices.Contains(k.Actions, w.Control) {
				acted[s] = true
			}
			if w.Reason == ReasonUnsupported {
				unknown = true
			}
		}
	}
	for _, s := range states {
		if !held[s] {
			t.Errorf("no case holds %s", s)
		} else if !acted[s] {
			t.Errorf("no case triggers %s", s)
		}
	}
	for s := range held {
		if !slices.Contains(states, s) && !strings.Contains(s, ReasonUnsupported) {
			t.Errorf("the corpus holds %s, which the capability function does not produce (add it to states)", s)
		}
	}
	if !unknown {
		t.Errorf("no case has a control a client does not know")
	}
	for _, name := range c.Controls {
		if !held[name+" available"] {
			t.Errorf("%s is never available", name)
		}
	}
}

// faithful is what a client that follows the descriptor presents: the
// page's form of the text (REASON: message → handoff).
func faithful(k *Case) []Presented {
	var out []Presented
	for _, w := range k.Wants() {
		c := k.wire(w.Control)
		p := Presented{Control: w.Control, Available: w.Available, Reason: w.Reason, Handoff: w.Handoff, Message: c.GetMessage()}
		if w.Reason == ReasonUnsupported {
			p.Message = "not supported by this client"
		}
		if !p.Available {
			p.Text = p.Reason + ": " + p.Message
			if p.Handoff != "" {
				p.Text += " → " + p.Handoff
			}
		}
		out = append(out, p)
	}
	return out
}

func faithfulAct(k *Case, action string) Acted {
	w := k.want(action)
	a := Acted{Control: action, Trigger: "#" + action, Performed: w.Available}
	if !w.Available {
		a.Reason, a.Handoff, a.Text = w.Reason, w.Handoff, w.Reason+" → "+w.Handoff
	}
	return a
}

// TestCompareBites: a faithful client passes every case; each doctoring of
// its result — as a client that drops, adds, flips or misreports a control
// would present it — is reported.
func TestCompareBites(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Cases {
		k := &c.Cases[i]
		if d := Compare(k, faithful(k)); len(d) > 0 {
			t.Errorf("%s: a faithful client fails: %q", k.Name, d)
		}
		for _, a := range k.Actions {
			if d := CompareAction(k, a, faithfulAct(k, a)); len(d) > 0 {
				t.Errorf("%s: a faithful client fails action %s: %q", k.Name, a, d)
			}
		}
	}
	k := caseNamed(t, c, "lease-held-by-other")
	for _, tc := range []struct {
		name   string
		doctor func([]Presented) []Presented
		want   string
	}{
		{"a control dropped", func(ps []Presented) []Presented {
			return slices.DeleteFunc(ps, func(p Presented) bool { return p.Control == "lease.steal" })
		}, "lease.steal: not presented (want available)"},
		{"a control added", func(ps []Presented) []Presented {
			return append(ps, Presented{Control: "session.pause", Available: true})
		}, "session.pause: presented, but the descriptor has no such control"},
		{"a control twice", func(ps []Presented) []Presented { return append(ps, ps[0]) }, "input.text: presented twice"},
		{"available flipped", func(ps []Presented) []Presented {
			ps[0].Available = true
			return ps
		}, "input.text: presented available, want unavailable LEASE_NOT_HELD → lease.steal"},
		{"handoff dropped", func(ps []Presented) []Presented {
			ps[2].Handoff = ""
			return ps
		}, "lease.take: presented unavailable LEASE_HELD, want unavailable LEASE_HELD → lease.steal"},
		{"message replaced", func(ps []Presented) []Presented {
			ps[0].Message = "no"
			return ps
		}, `input.text: message "no", the descriptor says "the input lease is held by browser bob"`},
		{"reason not shown", func(ps []Presented) []Presented {
			ps[0].Text = "the input lease is held by browser bob → lease.steal"
			return ps
		}, `input.text: the text shown, "the input lease is held by browser bob → lease.steal", does not show "LEASE_NOT_HELD"`},
		{"unsupported", func(ps []Presented) []Presented {
			ps[4] = Presented{Control: "lease.steal", Reason: ReasonUnsupported, Text: ReasonUnsupported}
			return ps
		}, "lease.steal: presented unavailable UNSUPPORTED, want available"},
	} {
		got := Compare(k, tc.doctor(faithful(k)))
		if !slices.Contains(got, tc.want) {
			t.Errorf("%s: differences %q, want %q among them", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name   string
		action string
		doctor func(*Acted)
		want   string
	}{
		{"an available control refused", "lease.steal", func(a *Acted) { a.Performed, a.Reason = false, ReasonUnsupported },
			`lease.steal: refused (UNSUPPORTED: ""), want it performed`},
		{"an unavailable control performed", "lease.take", func(a *Acted) { a.Performed = true },
			"lease.take: performed, want it refused (unavailable LEASE_HELD → lease.steal)"},
		{"no trigger", "lease.steal", func(a *Acted) { a.Trigger = "" }, "lease.steal: no trigger offered"},
		{"another control", "lease.take", func(a *Acted) { a.Control = "lease.steal" },
			`lease.take: the trigger "#lease.take" acts on "lease.steal"`},
		{"handoff not shown", "input.text", func(a *Acted) { a.Text = "LEASE_NOT_HELD" },
			`input.text: the refusal shown, "LEASE_NOT_HELD", does not show "lease.steal"`},
	} {
		a := faithfulAct(k, tc.action)
		tc.doctor(&a)
		if got := CompareAction(k, tc.action, a); !slices.Contains(got, tc.want) {
			t.Errorf("%s: differences %q, want %q among them", tc.name, got, tc.want)
		}
	}
}

// TestParseRejects: a corpus whose want lines disagree with its
// descriptor, or that lacks a control, does not load.
func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"want disagrees", `"input.text       unavailable NOT_ATTACHED → attach"`, `"input.text       available"`, "disagrees with the descriptor"},
		{"bad want line", `"lease.take       unavailable NOT_ATTACHED → attach"`, `"lease.take       maybe"`, "not NAME available"},
		{"unknown action", `"actions": ["input.text", "lease.take"`, `"actions": ["input.txt", "lease.take"`, "action input.txt is not a control"},
		{"a control lacking", `"controls": ["input.text",`, `"controls": ["input.text", "session.pause",`, "the descriptor lacks control session.pause"},
	} {
		data := strings.Replace(string(corpusJSON), tc.from, tc.to, 1)
		if data == string(corpusJSON) {
			t.Fatalf("%s: %s not in the corpus", tc.name, tc.from)
		}
		if _, err := Parse([]byte(data)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Parse: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func caseNamed(t *testing.T, c *Corpus, name string) *Case {
	t.Helper()
	for i := range c.Cases {
		if c.Cases[i].Name == name {
			return &c.Cases[i]
		}
	}
	t.Fatalf("no case %s", name)
	return nil
}
