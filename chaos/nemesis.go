package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// FaultEvent is one fault as it happened.
type FaultEvent struct {
	Kind    NemesisKind   `json:"kind"`
	Targets []string      `json:"targets"`
	Start   time.Duration `json:"start"` // since the run's clock started
	End     time.Duration `json:"end"`
	Detail  string        `json:"detail,omitempty"`
	Skipped string        `json:"skipped,omitempty"` // why it could not run
}

func (e FaultEvent) String() string {
	if e.Skipped != "" {
		return fmt.Sprintf("%7.1fs          %-18s skipped: %s", e.Start.Seconds(), e.Kind, e.Skipped)
	}
	s := fmt.Sprintf("%7.1fs–%7.1fs %-18s %s", e.Start.Seconds(), e.End.Seconds(), e.Kind, strings.Join(e.Targets, ","))
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

// nemesis executes a Plan against a fleet.
type nemesis struct {
	fleet  Fleet
	leader func(context.Context) string // current leader or ""
	since  func() time.Duration
	logf   func(format string, args ...any)

	mu     sync.Mutex
	events []FaultEvent
	down   map[string]bool // killed, not yet restarted
	paused map[string]bool
}

func newNemesis(f Fleet, leader func(context.Context) string, since func() time.Duration, logf func(string, ...any)) *nemesis {
	return &nemesis{fleet: f, leader: leader, since: since, logf: logf, down: map[string]bool{}, paused: map[string]bool{}}
}

// run plays the plan until it ends or ctx is done, then heals everything.
func (n *nemesis) run(ctx context.Context, p Plan) {
	defer n.healAll()
	for _, step := range p.Steps {
		if !sleepCtx(ctx, step.Gap) {
			return
		}
		var undo []func()
		var started []int
		for _, f := range step.Faults {
			ev, heal := n.start(ctx, f)
			n.mu.Lock()
			n.events = append(n.events, ev)
			idx := len(n.events) - 1
			n.mu.Unlock()
			if ev.Skipped != "" {
				n.logf("nemesis: %s skipped: %s", f.Kind, ev.Skipped)
				continue
			}
			n.logf("nemesis: %s start %s %s", f.Kind, strings.Join(ev.Targets, ","), ev.Detail)
			undo = append(undo, heal)
			started = append(started, idx)
		}
		sleepCtx(ctx, step.Hold)
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
			n.mu.Lock()
			n.events[started[i]].End = n.since()
			ev := n.events[started[i]]
			n.mu.Unlock()
			n.logf("nemesis: %s healed", ev.Kind)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// start applies one fault and returns how to heal it.
func (n *nemesis) start(ctx context.Context, f Fault) (FaultEvent, func()) {
	ev := FaultEvent{Kind: f.Kind, Start: n.since()}
	skip := func(why string) (FaultEvent, func()) { ev.Skipped = why; return ev, nil }
	if isNetworkKind(f.Kind) && !n.fleet.Net().Supports(f.Kind) {
		return skip("not supported by this fleet's network")
	}
	nodes := n.fleet.Nodes()
	up := n.upNodes()
	pickFrom := func(cands []string, pick int) string { return cands[pick%len(cands)] }
	leader := func() string {
		l := n.leader(ctx)
		if l == "" || !slices.Contains(up, l) {
			return ""
		}
		return l
	}
	others := func(x string) []string {
		var out []string
		for _, m := range nodes {
			if m != x {
				out = append(out, m)
			}
		}
		return out
	}
	switch f.Kind {
	case KillLeader, KillRandom:
		target := ""
		if f.Kind == KillLeader {
			target = leader()
		} else if len(up) > 0 {
			target = pickFrom(up, f.Pick)
		}
		if target == "" {
			return skip("no live target")
		}
		if err := n.fleet.Kill(target); err != nil {
			return skip(err.Error())
		}
		n.setDown(target, true)
		ev.Targets = []string{target}
		return ev, func() { n.restart(target) }
	case PauseLeader, PauseRandom:
		target := ""
		if f.Kind == PauseLeader {
			target = leader()
		} else if len(up) > 0 {
			target = pickFrom(up, f.Pick)
		}
		if target == "" {
			return skip("no live target")
		}
		if err := n.fleet.Pause(target); err != nil {
			return skip(err.Error())
		}
		n.setPaused(target, true)
		ev.Targets = []string{target}
		return ev, func() { n.resume(target) }
	case PartitionRandom, IsolateLeader, PartitionFollower:
		target := ""
		switch f.Kind {
		case PartitionRandom:
			target = pickFrom(nodes, f.Pick)
		case IsolateLeader:
			target = leader()
		case PartitionFollower:
			l := n.leader(ctx)
			cands := others(l)
			target = pickFrom(cands, f.Pick)
		}
		if target == "" {
			return skip("no leader to isolate")
		}
		if err := n.fleet.Net().Partition([]string{target}, others(target)); err != nil {
			return skip(err.Error())
		}
		ev.Targets = []string{target}
		ev.Detail = fmt.Sprintf("%s | %s", target, strings.Join(others(target), ","))
		return ev, n.healNet
	case OneWay:
		from := leader()
		if from == "" || f.Pick%2 == 1 {
			from = pickFrom(nodes, f.Pick)
		}
		to := pickFrom(others(from), f.Pick2)
		if err := n.fleet.Net().Block(from, to); err != nil {
			return skip(err.Error())
		}
		ev.Targets = []string{from, to}
		ev.Detail = from + " -/-> " + to
		return ev, n.healNet
	case Latency:
		for _, a := range nodes {
			for _, b := range nodes {
				if a != b {
					if err := n.fleet.Net().SetLatency(a, b, f.Latency); err != nil {
						n.healNet()
						return skip(err.Error())
					}
				}
			}
		}
		ev.Targets = nodes
		ev.Detail = "+" + f.Latency.String() + " each way"
		return ev, n.healNet
	case RestartAll:
		for _, m := range nodes {
			if !n.isDown(m) {
				if err := n.fleet.Kill(m); err != nil {
					n.logf("nemesis: kill %s: %v", m, err)
				}
				n.setDown(m, true)
			}
		}
		ev.Targets = nodes
		return ev, func() {
			for _, m := range nodes {
				n.restart(m)
			}
		}
	}
	return skip("unknown kind")
}

func (n *nemesis) restart(node string) {
	if !n.isDown(node) {
		return
	}
	n.setPaused(node, false)
	if err := n.fleet.Start(node); err != nil {
		n.logf("nemesis: start %s: %v", node, err)
		return
	}
	n.setDown(node, false)
}

func (n *nemesis) resume(node string) {
	n.mu.Lock()
	p := n.paused[node]
	n.mu.Unlock()
	if !p {
		return
	}
	if err := n.fleet.Resume(node); err != nil {
		n.logf("nemesis: resume %s: %v", node, err)
	}
	n.setPaused(node, false)
}

func (n *nemesis) healNet() {
	if err := n.fleet.Net().Heal(); err != nil {
		n.logf("nemesis: heal network: %v", err)
	}
}

// healAll ends every fault: network healed, paused nodes resumed, killed
// nodes started.
func (n *nemesis) healAll() {
	n.healNet()
	for _, m := range n.fleet.Nodes() {
		n.resume(m)
		n.restart(m)
	}
}

func (n *nemesis) upNodes() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, m := range n.fleet.Nodes() {
		if !n.down[m] && !n.paused[m] {
			out = append(out, m)
		}
	}
	return out
}

func (n *nemesis) isDown(node string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.down[node]
}

func (n *nemesis) setDown(node string, v bool) {
	n.mu.Lock()
	n.down[node] = v
	n.mu.Unlock()
}

func (n *nemesis) setPaused(node string, v bool) {
	n.mu.Lock()
	n.paused[node] = v
	n.mu.Unlock()
}

// Events returns the faults so far.
func (n *nemesis) Events() []FaultEvent {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.events)
}

// sleepCtx sleeps d or until ctx is done; it reports whether d elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
