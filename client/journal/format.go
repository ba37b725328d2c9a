package journal

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// FormatPlacement renders a placement tuple on one line, leaving out what
// is not set: "echo on n1, model m, provider p, account a"; an external
// one as "external: claude on host laptop-7, launch lch_1".
func FormatPlacement(p *fakv1.Placement) string {
	if p == nil {
		return ""
	}
	if p.GetRuntimeAdapter() == "external" {
		// A guarded launch's agent, on the user's machine: no node runs it.
		s := "external: " + cmp.Or(p.GetProvider(), "the agent")
		if p.GetHost() != "" {
			s += " on host " + p.GetHost()
		}
		return s + ", launch " + p.GetLaunchId()
	}
	s := p.GetRuntimeAdapter()
	if s == "" {
		s = "(no runtime adapter)"
	}
	if p.GetNode() != "" {
		s += " on " + p.GetNode()
	}
	for _, part := range [][2]string{{"model", p.GetModel()}, {"provider", p.GetProvider()}, {"account", p.GetAccountRef()}} {
		if part[1] != "" {
			s += ", " + part[0] + " " + part[1]
		}
	}
	return s
}

// Plural is "1 query", "2 queries", "0 events".
func Plural(n uint64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if stem, ok := strings.CutSuffix(noun, "y"); ok && !strings.HasSuffix(stem, "a") && !strings.HasSuffix(stem, "e") && !strings.HasSuffix(stem, "o") {
		return strconv.FormatUint(n, 10) + " " + stem + "ies"
	}
	return strconv.FormatUint(n, 10) + " " + noun + "s"
}

// FormatSpend renders micros (millionths of the account's currency) as a
// decimal amount without trailing zeros: 950000 is "0.95", 3000000 is "3".
func FormatSpend(micros uint64) string {
	whole := strconv.FormatUint(micros/1_000_000, 10)
	if frac := micros % 1_000_000; frac != 0 {
		return whole + "." + strings.TrimRight(fmt.Sprintf("%06d", frac), "0")
	}
	return whole
}

// formatCharge lists what a charge asked for: "1 turn, 100 output tokens,
// spend 0.25; context +500 tokens (via launch L)", or "nothing".
func formatCharge(f Charge) string {
	var parts []string
	if b := f.Usage; b != nil {
		for _, p := range []struct {
			n    uint64
			noun string
		}{{b.Turns, "turn"}, {b.OutputTokens, "output token"}, {b.Queries, "query"}, {b.ToolCalls, "tool call"}} {
			if p.n != 0 {
				parts = append(parts, Plural(p.n, p.noun))
			}
		}
		if b.SpendMicros != 0 {
			parts = append(parts, "spend "+FormatSpend(b.SpendMicros))
		}
	}
	s := strings.Join(parts, ", ")
	if f.ContextTokens != 0 {
		c := fmt.Sprintf("context +%d tokens", f.ContextTokens)
		if s != "" {
			c = "; " + c
		}
		s += c
	}
	if s == "" {
		s = "nothing"
	}
	if f.ViaLaunch != "" {
		s += " (via launch " + f.ViaLaunch + ")"
	}
	if f.Unmetered != "" {
		s += " (journaled late: unmetered when the call ended, " + f.Unmetered + ")"
	}
	return s
}

// axisName turns the FSM's axis names (spend_micros, output_tokens) into
// words.
func axisName(axis string) string {
	switch axis {
	case "spend_micros":
		return "spend"
	case "":
		return "budget"
	}
	return strings.ReplaceAll(axis, "_", " ")
}

// formatSeqs is "#5 #6".
func formatSeqs(seqs []uint64) string {
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = "#" + strconv.FormatUint(s, 10)
	}
	return strings.Join(parts, " ")
}

// formatArgs renders a tool call's arguments: a JSON string as itself,
// anything else as compact JSON.
func formatArgs(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		return b.String()
	}
	return string(raw)
}

// dataFields renders a JSON object's top-level fields as "[k=v k=v]" in key
// order, strings quoted when they would be ambiguous, nested values as
// compact JSON. Other JSON is shown compacted in brackets; data that is not
// JSON as its size.
func dataFields(data []byte) string {
	if len(bytes.TrimSpace(data)) == 0 {
		return ""
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		var compact bytes.Buffer
		if json.Compact(&compact, data) != nil {
			return fmt.Sprintf("[%d bytes of data]", len(data))
		}
		return "[" + compact.String() + "]"
	}
	if len(fields) == 0 {
		return ""
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+dataValue(fields[k]))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func dataValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" || strings.ContainsAny(s, " \t\"=[]") {
			return strconv.Quote(s)
		}
		return s
	}
	var compact bytes.Buffer
	if json.Compact(&compact, raw) != nil {
		return string(raw)
	}
	return compact.String()
}

func joinNonEmpty(sep string, parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, sep)
}

var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")

// singleLine joins a text's lines with spaces.
func singleLine(s string) string { return lineBreaks.Replace(strings.TrimSpace(s)) }
