package gateway

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Usage is what one model call consumed, as the upstream reported it.
type Usage struct {
	Model string
	// InputTokens are the prompt tokens billed at the input price: for
	// Anthropic without the cache reads and writes; for OpenAI and Gemini
	// the prompt minus its cached part.
	InputTokens      uint64
	CacheReadTokens  uint64
	CacheWriteTokens uint64
	OutputTokens     uint64
	// Seen: the upstream reported usage at all (a call cut off before
	// message_start reports none and is charged only its query).
	Seen bool
}

// Prompt is every token of the prompt: what the envelope's input axis
// counts.
func (u Usage) Prompt() uint64 { return u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens }

// Price is what a model's tokens cost, per million, in the account's
// currency.
type Price struct {
	InputPerMTok, OutputPerMTok, CacheReadPerMTok, CacheWritePerMTok float64
}

// PriceTable maps model names to prices: an exact name, or a pattern
// ending in '*' (a prefix); the longest match wins. Models it does not
// know cost nothing (their tokens are still counted).
type PriceTable struct {
	exact    map[string]Price
	prefixes []prefixPrice // longest first
}

type prefixPrice struct {
	prefix string
	price  Price
}

// NewPriceTable builds a table from model pattern → price.
func NewPriceTable(prices map[string]Price) (PriceTable, error) {
	t := PriceTable{exact: map[string]Price{}}
	for model, p := range prices {
		for _, v := range []float64{p.InputPerMTok, p.OutputPerMTok, p.CacheReadPerMTok, p.CacheWritePerMTok} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return PriceTable{}, fmt.Errorf("price %q: prices must be finite and not negative", model)
			}
		}
		if prefix, ok := strings.CutSuffix(model, "*"); ok {
			t.prefixes = append(t.prefixes, prefixPrice{prefix, p})
			continue
		}
		t.exact[model] = p
	}
	sort.Slice(t.prefixes, func(i, j int) bool {
		a, b := t.prefixes[i].prefix, t.prefixes[j].prefix
		return len(a) > len(b) || len(a) == len(b) && a < b
	})
	return t, nil
}

// Lookup returns the price of model.
func (t PriceTable) Lookup(model string) (Price, bool) {
	if p, ok := t.exact[model]; ok {
		return p, true
	}
	for _, pp := range t.prefixes {
		if strings.HasPrefix(model, pp.prefix) {
			return pp.price, true
		}
	}
	return Price{}, false
}

// SpendMicros is what u costs at p, in millionths of the currency unit:
// tokens × price per million tokens is exactly micros.
func (p Price) SpendMicros(u Usage) uint64 {
	f := float64(u.InputTokens)*p.InputPerMTok + float64(u.OutputTokens)*p.OutputPerMTok +
		float64(u.CacheReadTokens)*p.CacheReadPerMTok + float64(u.CacheWriteTokens)*p.CacheWritePerMTok
	return uint64(math.Round(f))
}

// Budget is the charge of one model call: one query, its prompt and
// output tokens, and its spend by the table.
func (t PriceTable) Budget(u Usage) *fsmpb.Budget {
	b := &fsmpb.Budget{Queries: 1, InputTokens: u.Prompt(), OutputTokens: u.OutputTokens}
	if p, ok := t.Lookup(u.Model); ok {
		b.SpendMicros = p.SpendMicros(u)
	}
	return b
}
