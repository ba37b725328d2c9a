package fsm

import (
	"fmt"
	"strings"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// What a move costs beyond its transfer (the contract: "any migration
// claim includes checkpoint, transfer, warm-up, and lost-cache costs"):
// RESTORED records the cache lineage the destination continues — the
// provider thread it resumes and whether the provider's cache can still be
// warm — and the first turn of the new epoch after cutover is its
// warm-up, measured between the leader-stamped times of its turn.started
// and turn.completed and journaled as move.warmed.

// Cache lineage states (CacheLineage.cache).
const (
	CacheWarm = "warm" // same provider, model, account and thread
	CacheCold = "cold" // something the provider keys its cache by changed
	CacheNone = "none" // no provider, model or thread: nothing cached to keep
)

// cacheLineage is what moving s to placement to keeps of the provider's
// cache. A provider thread follows when the runtime and provider stay (a
// move keeps the binding: the next turn resumes it); the cache can stay
// warm only if nothing it is keyed by changes.
func cacheLineage(s *fsmpb.Session, to *fsmpb.Placement) *fsmpb.CacheLineage {
	from := s.GetPlacement()
	l := &fsmpb.CacheLineage{}
	follows := s.ProviderThread && to.GetRuntimeAdapter() == from.GetRuntimeAdapter() && to.GetProvider() == from.GetProvider()
	if follows {
		l.ProviderThread = s.ProviderSessionId
	}
	var lost []string
	for _, f := range []struct{ what, a, b string }{
		{"provider", from.GetProvider(), to.GetProvider()},
		{"model", from.GetModel(), to.GetModel()},
		{"account", from.GetAccountRef(), to.GetAccountRef()},
	} {
		if f.a != f.b {
			lost = append(lost, fmt.Sprintf("%s %q → %q", f.what, f.a, f.b))
		}
	}
	if s.ProviderThread && !follows {
		lost = append(lost, "provider thread "+s.ProviderSessionId+" does not follow")
	}
	switch {
	case len(lost) > 0:
		l.Cache, l.Why = CacheCold, strings.Join(lost, "; ")
	case !s.ProviderThread && to.GetProvider() == "" && to.GetModel() == "":
		l.Cache, l.Why = CacheNone, "no provider, model or provider thread is bound"
	default:
		l.Cache, l.Why = CacheWarm, "same provider, model, account and thread: the provider's cache can still be warm"
	}
	return l
}

// cacheText is a lineage in a journal entry's words.
func cacheText(l *fsmpb.CacheLineage) string {
	switch l.GetCache() {
	case CacheWarm:
		if l.ProviderThread != "" {
			return "cache can be warm (thread " + l.ProviderThread + " resumes)"
		}
		return "cache can be warm"
	case CacheCold:
		return "cold cache: " + l.Why
	}
	return "no provider cache to keep"
}

// noteTurnStart starts the warm-up clock at the first turn.started of the
// epoch a move cut over to (again at the next, if that turn did not
// complete).
func noteTurnStart(c *fsmpb.Command, s *fsmpb.Session) {
	m := s.Move
	if m == nil || m.State != MoveCutoverCommitted || m.NewEpoch != s.Epoch || m.WarmupNanos != 0 {
		return
	}
	m.WarmupStartedUnixNano, m.WarmupInput = c.TimeUnixNano, s.TurnInputSeq
}

// warmedUp ends the warm-up when the turn it timed completes and returns
// the move.warmed entry (nil when this completion is not a warm-up's).
func warmedUp(c *fsmpb.Command, s *fsmpb.Session, input uint64) *fsmpb.Event {
	m := s.Move
	if m == nil || m.State != MoveCutoverCommitted || m.NewEpoch != s.Epoch || m.WarmupNanos != 0 ||
		m.WarmupStartedUnixNano == 0 || m.WarmupInput != input {
		return nil
	}
	m.WarmupNanos = max(c.TimeUnixNano-m.WarmupStartedUnixNano, 1)
	text := fmt.Sprintf("warm-up: the first turn after the move took %.1f ms; %s", float64(m.WarmupNanos)/1e6, cacheText(m.CacheLineage))
	return newEvent(s, c, KindMoveWarmed, text, fact(moveFact{
		MoveID: m.MoveId, State: m.State, To: s.Placement.GetNode(), NewEpoch: m.NewEpoch,
		ElapsedNanos: c.TimeUnixNano - m.RequestedUnixNano,
		WarmupNanos:  m.WarmupNanos, InputSeq: input, Cache: cacheFactOf(m.CacheLineage),
	}))
}

// cacheFact is a cache lineage in a move entry's data.
type cacheFact struct {
	ProviderThread string `json:"provider_thread,omitempty"`
	Cache          string `json:"cache"`
	Why            string `json:"why,omitempty"`
}

func cacheFactOf(l *fsmpb.CacheLineage) *cacheFact {
	if l == nil {
		return nil
	}
	return &cacheFact{ProviderThread: l.ProviderThread, Cache: l.Cache, Why: l.Why}
}
