package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/client/journal"
)

// Budgets (DESIGN.md §5): a lineage shares one envelope of turns, output
// tokens, queries, spend and tool calls; every session has its own context
// axis. Spend travels as micros (millionths of the account's currency unit)
// and is shown and typed as a decimal amount.

const microsPerUnit = 1_000_000

// parseSpend reads a decimal amount ("5", "0.25", "12.000001") as micros.
// More than six decimals, signs, exponents and overflows are refused.
func parseSpend(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" {
		return 0, fmt.Errorf("%q is not an amount", s)
	}
	if len(frac) > 6 {
		return 0, fmt.Errorf("%q has more than 6 decimals (spend is counted in millionths)", s)
	}
	for _, part := range []string{whole, frac} {
		for _, r := range part {
			if r < '0' || r > '9' {
				return 0, fmt.Errorf("%q is not a decimal amount like 12.50", s)
			}
		}
	}
	var units, micros uint64
	if whole != "" {
		n, err := strconv.ParseUint(whole, 10, 64)
		if err != nil || n > math.MaxUint64/microsPerUnit {
			return 0, fmt.Errorf("%q is too large", s)
		}
		units = n * microsPerUnit
	}
	if frac != "" {
		n, _ := strconv.ParseUint(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
		micros = n
	}
	if units > math.MaxUint64-micros {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return units + micros, nil
}

// spendFlag is a flag holding a decimal amount as micros.
type spendFlag struct{ micros uint64 }

func (f *spendFlag) String() string {
	if f == nil {
		return "0"
	}
	return journal.FormatSpend(f.micros)
}

func (f *spendFlag) Set(s string) error {
	n, err := parseSpend(s)
	if err != nil {
		return err
	}
	f.micros = n
	return nil
}

// budgetAxis is one row of a budget table.
type budgetAxis struct {
	name               string
	limit, used, rest  uint64
	format             func(uint64) string
	limited, exhausted bool
}

// budgetAxes lists an envelope's axes in a fixed order.
func budgetAxes(e *fakv1.Envelope) []budgetAxis {
	lim, used, rem := e.GetLimits(), e.GetUsed(), e.GetRemaining()
	count := formatUint
	axes := []budgetAxis{
		{name: "turns", limit: lim.GetTurns(), used: used.GetTurns(), rest: rem.GetTurns(), format: count},
		{name: "input tokens", limit: lim.GetInputTokens(), used: used.GetInputTokens(), rest: rem.GetInputTokens(), format: count},
		{name: "output tokens", limit: lim.GetOutputTokens(), used: used.GetOutputTokens(), rest: rem.GetOutputTokens(), format: count},
		{name: "queries", limit: lim.GetQueries(), used: used.GetQueries(), rest: rem.GetQueries(), format: count},
		{name: "spend", limit: lim.GetSpendMicros(), used: used.GetSpendMicros(), rest: rem.GetSpendMicros(), format: journal.FormatSpend},
		{name: "tool calls", limit: lim.GetToolCalls(), used: used.GetToolCalls(), rest: rem.GetToolCalls(), format: count},
	}
	for i := range axes {
		a := &axes[i]
		a.limited = a.limit != 0
		if a.limited && a.rest == 0 && a.used < a.limit {
			// An older server that does not fill remaining in.
			a.rest = a.limit - a.used
		}
		a.exhausted = a.limited && a.rest == 0
	}
	// Input tokens are counted only where model calls are metered (a
	// gateway): an envelope that never saw one does not show the axis.
	return slices.DeleteFunc(axes, func(a budgetAxis) bool { return a.name == "input tokens" && !a.limited && a.used == 0 })
}

// writeBudget prints an envelope: a title line with what is shared and
// how long it has run, then one row per axis.
func writeBudget(w io.Writer, e *fakv1.Envelope) error {
	fmt.Fprintf(w, "Budget (%s):\n", budgetTitle(e))
	rows := make([][]string, 0, 5)
	for _, a := range budgetAxes(e) {
		limit, rest := "unlimited", ""
		if a.limited {
			limit, rest = a.format(a.limit), a.format(a.rest)
			if a.exhausted {
				rest += " (exhausted)"
			}
		}
		rows = append(rows, []string{a.name, limit, a.format(a.used), rest})
	}
	return writeTable(w, []string{"AXIS", "LIMIT", "USED", "REMAINING"}, rows)
}

// budgetTitle is "envelope ID, shared by N sessions, 1m5s elapsed, 2
// refusals", with priority, pace and QA envelope when set.
func budgetTitle(e *fakv1.Envelope) string {
	parts := []string{"envelope " + e.GetEnvelopeId()}
	if n := e.GetSessions(); n > 0 {
		parts = append(parts, "shared by "+journal.Plural(uint64(n), "session"))
	}
	parts = append(parts, formatElapsed(e.GetElapsedMs())+" elapsed", journal.Plural(e.GetRefusals(), "refusal"))
	for _, kv := range [][2]string{{"priority", e.GetPriority()}, {"pace", e.GetPace()}, {"QA envelope", e.GetQaEnvelope()}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+" "+kv[1])
		}
	}
	return strings.Join(parts, ", ")
}

// formatElapsed renders milliseconds as a duration rounded to the second
// (to the millisecond under a second).
func formatElapsed(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	if d >= time.Second {
		d = d.Round(time.Second)
	}
	return d.String()
}

// formatContext renders a session's context axis: "120 of 1000 tokens
// used (880 left)", or "120 tokens used (no cap)".
func formatContext(used, limit uint64) string {
	if limit == 0 {
		return formatUint(used) + " tokens used (no cap)"
	}
	left := uint64(0)
	if used < limit {
		left = limit - used
	}
	return fmt.Sprintf("%d of %d tokens used (%d left)", used, limit, left)
}
