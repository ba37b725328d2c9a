package conformance

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// ReasonUnsupported is the reason a client gives for a control of the
// capability set it cannot drive (a control a newer fleet added): it still
// shows the control, marked unavailable, never hides it.
const ReasonUnsupported = "UNSUPPORTED"

//go:embed testdata/controls.json
var corpusJSON []byte

// Corpus is the fixture: the capability-set version it was captured at,
// every control of that version, and the cases.
type Corpus struct {
	About    string   `json:"about"`
	Version  uint32   `json:"version"`
	Controls []string `json:"controls"`
	Cases    []Case   `json:"cases"`
}

// Case is one descriptor, the controls a user triggers on it, and what
// every client must present for each control.
type Case struct {
	Name string `json:"name"`
	Note string `json:"note"`
	// As is the attachment the descriptor is described for ("" for an
	// observer that has not attached).
	As string `json:"as"`
	// Role is the token role of the caller the descriptor was described
	// for (read, agent; "" for operator). Clients never see it: they render
	// the descriptor's capability set, which already reflects it.
	Role string `json:"role"`
	// Actions are the controls a user triggers on this descriptor; each is
	// one (descriptor, action) check.
	Actions []string `json:"actions"`
	// Want is one line per control of the descriptor's capability set, in
	// its order: "NAME available", "NAME unavailable REASON" or
	// "NAME unavailable REASON → HANDOFF".
	Want []string `json:"want"`
	// DescriptorJSON is the descriptor as the fleet sends it (protojson,
	// the page's input); Descriptor the same, decoded.
	DescriptorJSON json.RawMessage                `json:"descriptor"`
	Descriptor     *fakv1.DescribeSessionResponse `json:"-"`

	wants []Want
}

// Want is what a client must present for one control.
type Want struct {
	Control   string
	Available bool
	Reason    string
	Handoff   string
}

// Presented is one control as a client presents it: its availability, the
// reason, message and handoff of the capability set when unavailable, and
// the text the user sees for it.
type Presented struct {
	Control   string `json:"control"`
	Available bool   `json:"available"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
	Handoff   string `json:"handoff"`
	Text      string `json:"text"`
}

// Acted is what a client does when the user triggers a control: the
// trigger it offers (a typed command, a button), whether it goes ahead
// (calls the fleet), and when not, the refusal it shows.
type Acted struct {
	Control   string `json:"control"`
	Trigger   string `json:"trigger"`
	Performed bool   `json:"performed"`
	Reason    string `json:"reason"`
	Handoff   string `json:"handoff"`
	Text      string `json:"text"`
}

// Load returns the embedded corpus, checked (see Parse).
func Load() (*Corpus, error) { return Parse(corpusJSON) }

// Parse decodes a corpus and checks it is consistent: every case's
// descriptor holds every control of the corpus, its want lines name the
// descriptor's controls in order and agree with them (a control the corpus
// does not know must be wanted UNSUPPORTED), and its actions are controls
// of the descriptor.
func Parse(data []byte) (*Corpus, error) {
	var c Corpus
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	if len(c.Controls) == 0 || len(c.Cases) == 0 {
		return nil, fmt.Errorf("corpus: no controls or no cases")
	}
	seen := map[string]bool{}
	for i := range c.Cases {
		k := &c.Cases[i]
		if k.Name == "" || seen[k.Name] {
			return nil, fmt.Errorf("corpus: case %d: empty or repeated name %q", i, k.Name)
		}
		seen[k.Name] = true
		k.Descriptor = &fakv1.DescribeSessionResponse{}
		if err := protojson.Unmarshal(k.DescriptorJSON, k.Descriptor); err != nil {
			return nil, fmt.Errorf("corpus: case %s: descriptor: %w", k.Name, err)
		}
		if err := k.check(c.Controls); err != nil {
			return nil, fmt.Errorf("corpus: case %s: %w", k.Name, err)
		}
	}
	return &c, nil
}

func (k *Case) check(known []string) error {
	controls := k.Descriptor.GetCapabilities().GetControls()
	if len(k.Want) != len(controls) {
		return fmt.Errorf("%d want lines for %d controls", len(k.Want), len(controls))
	}
	k.wants = nil
	for i, line := range k.Want {
		w, err := parseWant(line)
		if err != nil {
			return err
		}
		c := controls[i]
		if w.Control != c.GetName() {
			return fmt.Errorf("want line %d is %s, the descriptor's control %s", i+1, w.Control, c.GetName())
		}
		if slices.Contains(known, w.Control) {
			if w.Available != c.GetAvailable() || w.Reason != c.GetReason() || w.Handoff != c.GetHandoff() {
				return fmt.Errorf("want %q disagrees with the descriptor's %v", line, c)
			}
		} else if w.Available || w.Reason != ReasonUnsupported {
			return fmt.Errorf("%s is not a control of the corpus: a client must present it unavailable %s", w.Control, ReasonUnsupported)
		}
		k.wants = append(k.wants, w)
	}
	for _, name := range known {
		if k.want(name) == nil {
			return fmt.Errorf("the descriptor lacks control %s", name)
		}
	}
	for _, a := range k.Actions {
		if k.want(a) == nil {
			return fmt.Errorf("action %s is not a control of the descriptor", a)
		}
	}
	return nil
}

// parseWant reads "NAME available", "NAME unavailable REASON" or
// "NAME unavailable REASON → HANDOFF" (the handoff may hold spaces).
func parseWant(line string) (Want, error) {
	head, handoff, _ := strings.Cut(line, " → ")
	f := strings.Fields(head)
	switch {
	case len(f) == 2 && f[1] == "available" && handoff == "":
		return Want{Control: f[0], Available: true}, nil
	case len(f) == 3 && f[1] == "unavailable":
		return Want{Control: f[0], Reason: f[2], Handoff: strings.TrimSpace(handoff)}, nil
	}
	return Want{}, fmt.Errorf("want line %q: not NAME available | NAME unavailable REASON [→ HANDOFF]", line)
}

// Wants returns what a client must present for each control, in the
// capability set's order.
func (k *Case) Wants() []Want { return slices.Clone(k.wants) }

func (k *Case) want(name string) *Want {
	for i := range k.wants {
		if k.wants[i].Control == name {
			return &k.wants[i]
		}
	}
	return nil
}

// wire returns the descriptor's control name.
func (k *Case) wire(name string) *fakv1.Control {
	for _, c := range k.Descriptor.GetCapabilities().GetControls() {
		if c.GetName() == name {
			return c
		}
	}
	return nil
}

// Compare checks the controls a client presents for the case's descriptor
// against the wants and returns every difference: a control wanted but not
// presented (or presented twice), a control presented that the descriptor
// lacks, a different availability, reason or handoff, a message other than
// the descriptor's, and an unavailable control whose text does not show
// its reason, message and handoff.
func Compare(k *Case, got []Presented) []string {
	var diffs []string
	by := map[string]Presented{}
	for _, p := range got {
		if _, dup := by[p.Control]; dup {
			diffs = append(diffs, p.Control+": presented twice")
		}
		by[p.Control] = p
	}
	for _, w := range k.wants {
		p, ok := by[w.Control]
		if !ok {
			diffs = append(diffs, w.Control+": not presented (want "+w.String()+")")
			continue
		}
		delete(by, w.Control)
		if p.Available != w.Available || p.Reason != w.Reason || p.Handoff != w.Handoff {
			diffs = append(diffs, fmt.Sprintf("%s: presented %s, want %s", w.Control, p.state(), w.String()))
			continue
		}
		if w.Available {
			continue
		}
		if c := k.wire(w.Control); w.Reason != ReasonUnsupported && p.Message != c.GetMessage() {
			diffs = append(diffs, fmt.Sprintf("%s: message %q, the descriptor says %q", w.Control, p.Message, c.GetMessage()))
		}
		for _, part := range []string{p.Reason, p.Message, p.Handoff} {
			if part != "" && !strings.Contains(p.Text, part) {
				diffs = append(diffs, fmt.Sprintf("%s: the text shown, %q, does not show %q", w.Control, p.Text, part))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(by)) {
		diffs = append(diffs, name+": presented, but the descriptor has no such control")
	}
	return diffs
}

// CompareAction checks what a client does when the user triggers action on
// the case's descriptor: it offers a trigger (unless it does not support
// the control), goes ahead exactly when the control is available, and
// otherwise refuses with the control's reason and handoff, shown in its
// text.
func CompareAction(k *Case, action string, got Acted) []string {
	w := k.want(action)
	if w == nil {
		return []string{action + ": not a control of case " + k.Name}
	}
	var diffs []string
	if got.Control != action {
		diffs = append(diffs, fmt.Sprintf("%s: the trigger %q acts on %q", action, got.Trigger, got.Control))
	}
	if got.Trigger == "" && w.Reason != ReasonUnsupported {
		diffs = append(diffs, action+": no trigger offered")
	}
	switch {
	case w.Available && !got.Performed:
		diffs = append(diffs, fmt.Sprintf("%s: refused (%s: %q), want it performed", action, got.Reason, got.Text))
	case !w.Available && got.Performed:
		diffs = append(diffs, fmt.Sprintf("%s: performed, want it refused (%s)", action, w.String()))
	case !w.Available:
		if got.Reason != w.Reason || got.Handoff != w.Handoff {
			diffs = append(diffs, fmt.Sprintf("%s: refused with %s → %q, want %s", action, got.Reason, got.Handoff, w.String()))
		}
		for _, part := range []string{w.Reason, w.Handoff} {
			if part != "" && !strings.Contains(got.Text, part) {
				diffs = append(diffs, fmt.Sprintf("%s: the refusal shown, %q, does not show %q", action, got.Text, part))
			}
		}
	}
	return diffs
}

func (w Want) String() string {
	if w.Available {
		return "available"
	}
	s := "unavailable " + w.Reason
	if w.Handoff != "" {
		s += " → " + w.Handoff
	}
	return s
}

func (p Presented) state() string {
	return Want{Control: p.Control, Available: p.Available, Reason: p.Reason, Handoff: p.Handoff}.String()
}
