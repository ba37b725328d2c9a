package term

import (
	"context"
	"fmt"
	"strings"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// reasonUnsupported marks a control of the capability set this client
// cannot drive (one a newer fleet added): listed, never hidden.
const reasonUnsupported = "UNSUPPORTED"

// commands are the controls this client drives, in the fleet's order, with
// what a user types to trigger each (and an example line of it).
var commands = []struct{ control, command, example string }{
	{"input.text", "text", "hello"},
	{"turn.interrupt", "/interrupt or Ctrl-C", "/interrupt"},
	{"lease.take", "/take", "/take"},
	{"lease.release", "/release", "/release"},
	{"lease.steal", "/steal", "/steal"},
	{"approval.answer", "y or n", "y"},
	{"session.stop", "/stop [REASON]", "/stop"},
	{"session.fresh", "/fresh", "/fresh"},
	{"session.reset", "/reset", "/reset"},
	{"session.clear", "/clear", "/clear"},
	{"session.new", "/new", "/new"},
	{"session.fork", "/fork [SEQ]", "/fork"},
	{"session.move", "/move [NODE]", "/move"},
	{"detach", "/detach", "/detach"},
}

// Capabilities are the controls this client can render and use: every
// control it has a command for.
var Capabilities = func() []string {
	out := make([]string, len(commands))
	for i, c := range commands {
		out[i] = c.control
	}
	return out
}()

// commandOf returns what a user types to trigger a control; "" when this
// client cannot drive it.
func commandOf(control string) string {
	for _, c := range commands {
		if c.control == control {
			return c.command
		}
	}
	return ""
}

// Control is one control of the capability set as this client presents it.
type Control struct {
	Name string
	// Command is what a user types to trigger it; "" when this client
	// cannot drive it.
	Command   string
	Available bool
	// Reason, Message and Handoff say, when it is unavailable, why and
	// what to do instead (the fleet's words, or UNSUPPORTED).
	Reason, Message, Handoff string
}

// Controls returns every control of cs as this client presents it, in the
// fleet's order: the fleet's availability, reason and handoff for a
// control it can drive, and unavailable (UNSUPPORTED) for one it cannot.
// The controls listing prints exactly these; the client conformance
// fixture (client/conformance) compares them with its corpus.
func Controls(cs *fakv1.CapabilitySet) []Control {
	var out []Control
	for _, c := range cs.GetControls() {
		ctl := Control{Name: c.GetName(), Command: commandOf(c.GetName())}
		if ctl.Command == "" {
			ctl.Reason, ctl.Message = reasonUnsupported, "not supported by fak session open"
		} else {
			ctl.Available, ctl.Reason, ctl.Message, ctl.Handoff = c.GetAvailable(), c.GetReason(), c.GetMessage(), c.GetHandoff()
		}
		out = append(out, ctl)
	}
	return out
}

// status is "available", or "unavailable: " and why not.
func (c Control) status() string {
	if c.Available {
		return "available"
	}
	return "unavailable: " + c.why()
}

// why says why the control is unavailable and what to do instead:
// "MESSAGE (REASON); instead: HANDOFF".
func (c Control) why() string {
	s := singleLine(c.Message)
	if c.Reason != "" {
		s = joinNonEmpty(" ", s, "("+c.Reason+")")
	}
	if s == "" {
		s = "not available"
	}
	if c.Handoff != "" {
		s += "; instead: " + handoffText(c.Handoff)
	}
	return s
}

// handoffText names a handoff: a control this client drives as what to
// type (and the control), anything else (a fakctl command, "attach") as
// the fleet wrote it.
func handoffText(h string) string {
	if cmd := commandOf(h); cmd != "" {
		return "type " + cmd + " (" + h + ")"
	}
	return h
}

// controls renders the capability set: every control, what triggers it,
// available or not, with the reason and the handoff when it is not.
func controls(cs *fakv1.CapabilitySet, as string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "controls (v%d, %s):\n", cs.GetVersion(), as)
	cl := Controls(cs)
	wName, wCmd := 0, 0
	for _, c := range cl {
		wName, wCmd = max(wName, len(c.Name)), max(wCmd, len(c.Command))
	}
	for _, c := range cl {
		cmd := c.Command
		if cmd == "" {
			cmd = "-"
		}
		fmt.Fprintf(&b, "  %-*s  %-*s  %s\n", wName, c.Name, wCmd, cmd, c.status())
	}
	return b.String()
}

// trigger returns the control a typed line triggers: text is input (//
// escapes a leading slash), y or n answer a pending approval, a command
// its control. "" for anything else (/help, /quit, /controls, an unknown
// command, a blank line).
func trigger(word string, answerable bool) string {
	cmd, _, _ := strings.Cut(word, " ")
	switch {
	case word == "":
		return ""
	case answerable && (isYes(word) || isNo(word)):
		return "approval.answer"
	case strings.HasPrefix(word, "//") || !strings.HasPrefix(word, "/"):
		return "input.text"
	}
	for _, c := range commands {
		if strings.HasPrefix(c.command, "/") && strings.Fields(c.command)[0] == cmd {
			if cmd != word && !strings.Contains(c.command, "[") {
				return "" // a command that takes no argument, given one
			}
			return c.control
		}
	}
	return ""
}

// check says whether control is available in cs, and how this client
// presents it. A control cs does not list at all (an older fleet) is left
// for the fleet to decide.
func check(cs *fakv1.CapabilitySet, control string) (Control, bool) {
	for _, c := range Controls(cs) {
		if c.Name == control {
			return c, c.Available
		}
	}
	return Control{Name: control, Command: commandOf(control)}, true
}

// allowed describes the session as this attachment sees it and reports
// whether control is available; when it is not, it prints why and what to
// do instead, after what ("not sent", "not done: /take"), and the control
// is not triggered. The fleet still decides: when the describe fails, the
// call goes ahead and the fleet's refusal, if any, is printed.
func (o *opener) allowed(ctx context.Context, control, what string) bool {
	d, err := o.conn.describe(ctx, o.conn.attachment())
	if err != nil {
		return true
	}
	c, ok := check(d.GetCapabilities(), control)
	if !ok {
		o.out.notice("%s", refusal(what, c))
	}
	return ok
}

// refusal is the notice printed instead of triggering an unavailable
// control.
func refusal(what string, c Control) string { return what + ": " + c.why() }

// showControls describes the session and prints its controls (/controls).
func (o *opener) showControls(ctx context.Context) {
	d, err := o.conn.describe(ctx, o.conn.attachment())
	if err != nil {
		o.out.notice("could not describe the session: %s", ErrorLine(err))
		return
	}
	o.out.raw(controls(d.GetCapabilities(), o.view))
}
