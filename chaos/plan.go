package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// NemesisKind names one kind of fault.
type NemesisKind string

const (
	KillLeader        NemesisKind = "kill-leader"        // SIGKILL the leader, restart it when the fault ends
	KillRandom        NemesisKind = "kill-random"        // SIGKILL a random node
	PauseLeader       NemesisKind = "pause-leader"       // SIGSTOP the leader, SIGCONT when the fault ends
	PauseRandom       NemesisKind = "pause-random"       // SIGSTOP a random node
	PartitionRandom   NemesisKind = "partition-random"   // majority/minority split around a random node
	IsolateLeader     NemesisKind = "isolate-leader"     // the leader alone in the minority
	OneWay            NemesisKind = "one-way"            // drop traffic from one node to another only
	Latency           NemesisKind = "latency"            // add one-way delay on every link
	RestartAll        NemesisKind = "restart-all"        // SIGKILL every node at once, then start them all
	PartitionFollower NemesisKind = "partition-follower" // a follower alone in the minority
)

// AllNemeses is every kind, the default set.
var AllNemeses = []NemesisKind{
	KillLeader, KillRandom, PauseLeader, PauseRandom, PartitionRandom,
	IsolateLeader, PartitionFollower, OneWay, Latency, RestartAll,
}

// ParseNemeses reads a comma-separated list ("all" = every kind).
func ParseNemeses(s string) ([]NemesisKind, error) {
	if s == "" || s == "all" {
		return AllNemeses, nil
	}
	var out []NemesisKind
	for _, part := range strings.Split(s, ",") {
		k := NemesisKind(strings.TrimSpace(part))
		found := false
		for _, known := range AllNemeses {
			if k == known {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown nemesis %q (known: %s)", k, joinKinds(AllNemeses))
		}
		out = append(out, k)
	}
	return out, nil
}

func joinKinds(ks []NemesisKind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}

// Fault is one planned fault. Node picks are fixed by the plan (an index
// into the live candidates when the fault starts); "leader" targets are
// resolved when the fault starts, since who leads depends on the run.
type Fault struct {
	Kind    NemesisKind
	Pick    int           // random node choice (index modulo candidates)
	Pick2   int           // second node choice (one-way target)
	Latency time.Duration // for Latency
}

// Step is a calm gap followed by one or two faults held together.
type Step struct {
	Gap    time.Duration // calm before the faults start
	Hold   time.Duration // how long the faults last
	Faults []Fault
}

// Plan is the seeded schedule of a run.
type Plan struct {
	Seed  int64
	Steps []Step
}

// NewPlan draws a schedule covering duration from seed: calm gaps of 1-4 s
// and faults held 2-8 s; a quarter of the steps combine a process fault with
// a network fault. The same seed and kinds give the same plan.
func NewPlan(seed int64, duration time.Duration, kinds []NemesisKind) Plan {
	r := rand.New(rand.NewPCG(uint64(seed), 0x6661_6b63_6861_6f73)) // "fakchaos"
	p := Plan{Seed: seed}
	if len(kinds) == 0 {
		return p
	}
	var total time.Duration
	for total < duration {
		s := Step{
			Gap:  time.Duration(1000+r.IntN(3000)) * time.Millisecond,
			Hold: time.Duration(2000+r.IntN(6000)) * time.Millisecond,
		}
		first := drawFault(r, kinds[r.IntN(len(kinds))])
		s.Faults = append(s.Faults, first)
		if first.Kind == RestartAll {
			s.Hold = time.Duration(500+r.IntN(2500)) * time.Millisecond
		} else if r.IntN(4) == 0 {
			if second, ok := companion(r, first.Kind, kinds); ok {
				s.Faults = append(s.Faults, drawFault(r, second))
			}
		}
		p.Steps = append(p.Steps, s)
		total += s.Gap + s.Hold
	}
	return p
}

func drawFault(r *rand.Rand, k NemesisKind) Fault {
	f := Fault{Kind: k, Pick: r.IntN(1 << 20), Pick2: r.IntN(1 << 20)}
	if k == Latency {
		f.Latency = time.Duration(20+r.IntN(180)) * time.Millisecond
	}
	return f
}

// companion picks a fault of the other family (process vs network) to hold
// together with first, if the enabled kinds have one.
func companion(r *rand.Rand, first NemesisKind, kinds []NemesisKind) (NemesisKind, bool) {
	var cands []NemesisKind
	for _, k := range kinds {
		if k != RestartAll && isNetworkKind(k) != isNetworkKind(first) {
			cands = append(cands, k)
		}
	}
	if len(cands) == 0 {
		return "", false
	}
	return cands[r.IntN(len(cands))], true
}

func isNetworkKind(k NemesisKind) bool {
	switch k {
	case PartitionRandom, IsolateLeader, PartitionFollower, OneWay, Latency:
		return true
	}
	return false
}

// String lists the plan, one step per line.
func (p Plan) String() string {
	var b strings.Builder
	at := time.Duration(0)
	for i, s := range p.Steps {
		at += s.Gap
		kinds := make([]string, len(s.Faults))
		for j, f := range s.Faults {
			kinds[j] = string(f.Kind)
		}
		fmt.Fprintf(&b, "%3d  +%-8s hold %-6s %s\n", i+1, at.Round(time.Millisecond), s.Hold.Round(time.Millisecond), strings.Join(kinds, " + "))
		at += s.Hold
	}
	return b.String()
}
