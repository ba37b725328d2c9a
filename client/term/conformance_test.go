package term

import (
	"slices"
	"strings"
	"testing"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/client/conformance"
)

// presents is what the terminal shows of a capability set: Controls, each
// with the line the controls listing prints for it.
func presents(t *testing.T, cs *fakv1.CapabilitySet) []conformance.Presented {
	t.Helper()
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSuffix(controls(cs, "conformance"), "\n"), "\n")[1:] {
		f := strings.Fields(l)
		if _, dup := lines[f[0]]; dup {
			t.Errorf("the listing prints %s twice", f[0])
		}
		lines[f[0]] = l
	}
	var out []conformance.Presented
	for _, c := range Controls(cs) {
		text, ok := lines[c.Name]
		if !ok {
			t.Errorf("the listing does not print %s", c.Name)
		}
		out = append(out, conformance.Presented{Control: c.Name, Available: c.Available, Reason: c.Reason,
			Message: c.Message, Handoff: c.Handoff, Text: text})
	}
	if len(lines) != len(out) {
		t.Errorf("the listing prints %d controls, Controls returns %d", len(lines), len(out))
	}
	return out
}

// acts is what the terminal does when a user triggers action: it types the
// control's command (an approval is pending, so y answers it), which the
// command parser resolves to a control, and the check against the
// capability set decides — the code path of opener.command and allowed.
func acts(cs *fakv1.CapabilitySet, action string) conformance.Acted {
	line := ""
	for _, c := range commands {
		if c.control == action {
			line = c.example
		}
	}
	if line == "" {
		// No command: nothing to type; the listing marks it unsupported.
		c, _ := check(cs, action)
		return conformance.Acted{Control: action, Reason: c.Reason, Handoff: c.Handoff, Text: c.why()}
	}
	control := trigger(line, true)
	c, ok := check(cs, control)
	a := conformance.Acted{Control: control, Trigger: line, Performed: ok}
	if !ok {
		a.Reason, a.Handoff, a.Text = c.Reason, c.Handoff, refusal("not done: "+line, c)
	}
	return a
}

// TestConformance checks the terminal client against the conformance
// corpus: for every case, the controls it presents and prints, and what it
// does for every action.
func TestConformance(t *testing.T) {
	corpus, err := conformance.Load()
	if err != nil {
		t.Fatal(err)
	}
	for i := range corpus.Cases {
		k := &corpus.Cases[i]
		t.Run(k.Name, func(t *testing.T) {
			cs := k.Descriptor.GetCapabilities()
			for _, d := range conformance.Compare(k, presents(t, cs)) {
				t.Error(d)
			}
			for _, a := range k.Actions {
				for _, d := range conformance.CompareAction(k, a, acts(cs, a)) {
					t.Error(d)
				}
			}
		})
	}
}

// TestConformanceBites: the fixture fails a terminal that drops a control
// from what it presents, or that loses the command of a control.
func TestConformanceBites(t *testing.T) {
	corpus, err := conformance.Load()
	if err != nil {
		t.Fatal(err)
	}
	k := &corpus.Cases[slices.IndexFunc(corpus.Cases, func(c conformance.Case) bool { return c.Name == "lease-held-by-other" })]
	cs := k.Descriptor.GetCapabilities()

	// A control filtered out of what the terminal presents.
	got := slices.DeleteFunc(presents(t, cs), func(p conformance.Presented) bool { return p.Control == "lease.steal" })
	if d := conformance.Compare(k, got); !slices.Contains(d, "lease.steal: not presented (want available)") {
		t.Errorf("a terminal without lease.steal passes: %q", d)
	}

	// A control the terminal has no command for any more: listed as
	// unsupported, and its action has no trigger.
	saved := slices.Clone(commands)
	defer func() { commands = saved }()
	commands = slices.DeleteFunc(commands, func(c struct{ control, command, example string }) bool { return c.control == "lease.steal" })
	if d := conformance.Compare(k, presents(t, cs)); !slices.Contains(d, "lease.steal: presented unavailable UNSUPPORTED, want available") {
		t.Errorf("a terminal that cannot steal passes: %q", d)
	}
	if d := conformance.CompareAction(k, "lease.steal", acts(cs, "lease.steal")); len(d) == 0 {
		t.Errorf("a terminal that cannot steal passes the steal action")
	}
}

// TestTrigger: typed lines resolve to the controls they trigger.
func TestTrigger(t *testing.T) {
	for _, tc := range []struct {
		line       string
		answerable bool
		want       string
	}{
		{"hello", false, "input.text"},
		{"//etc", false, "input.text"},
		{"y", false, "input.text"},
		{"y", true, "approval.answer"},
		{"No", true, "approval.answer"},
		{"/take", false, "lease.take"},
		{"/take now", false, ""},
		{"/steal", false, "lease.steal"},
		{"/release", false, "lease.release"},
		{"/stop", false, "session.stop"},
		{"/stop done for today", false, "session.stop"},
		{"/fork", false, "session.fork"},
		{"/fork 3", false, "session.fork"},
		{"/forkx", false, ""},
		{"/move n2", false, "session.move"},
		{"/detach", false, "detach"},
		{"/quit", false, ""},
		{"/nope", false, ""},
		{"", false, ""},
	} {
		if got := trigger(tc.line, tc.answerable); got != tc.want {
			t.Errorf("trigger(%q, %v) = %q, want %q", tc.line, tc.answerable, got, tc.want)
		}
	}
	// Every control the terminal drives is triggered by its own example.
	for _, c := range commands {
		if got := trigger(c.example, true); got != c.control {
			t.Errorf("%s: its example %q triggers %q", c.control, c.example, got)
		}
	}
}
