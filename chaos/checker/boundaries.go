package checker

import (
	"fmt"
)

// LineageNode is one session of a launch's lineage, as read at the end.
type LineageNode struct {
	Session           string
	Parent            string
	Children          []string
	Stopped           bool
	StopReason        string
	ProviderSessionID string
}

// LaunchLineage is what a launch's repeated clears left behind.
type LaunchLineage struct {
	Root    string
	Default string
	// Acked are the provider ids whose clear some sender saw acknowledged,
	// in delivery order.
	Acked []string
	Nodes []LineageNode
}

// BoundaryResult is the verdict of Boundaries.
type BoundaryResult struct {
	Ok         bool
	Violations []string
	Launches   int
	Clears     int
	Sessions   int
}

// Boundaries checks that repeated and concurrent deliveries of each
// provider clear created exactly one child: the lineage of a launch is a
// single chain root → child → … with one session per acknowledged provider
// id, every session but the last STOPPED with PROVIDER_SESSION_CLEAR, and
// the launch's default session is the end of the chain.
func Boundaries(launches map[string]LaunchLineage) BoundaryResult {
	r := BoundaryResult{Launches: len(launches)}
	bad := func(format string, args ...any) { r.Violations = append(r.Violations, fmt.Sprintf(format, args...)) }
	for id, l := range launches {
		r.Clears += len(l.Acked)
		r.Sessions += len(l.Nodes)
		byID := map[string]LineageNode{}
		seenPID := map[string]string{}
		for _, n := range l.Nodes {
			byID[n.Session] = n
			if len(n.Children) > 1 {
				bad("launch %s: session %s has %d children %v (one clear made several sessions)", id, n.Session, len(n.Children), n.Children)
			}
			if n.ProviderSessionID != "" && n.Session != l.Root {
				if other, dup := seenPID[n.ProviderSessionID]; dup {
					bad("launch %s: provider id %s opened two sessions, %s and %s", id, n.ProviderSessionID, other, n.Session)
				}
				seenPID[n.ProviderSessionID] = n.Session
			}
		}
		for _, pid := range l.Acked {
			if _, ok := seenPID[pid]; !ok {
				bad("launch %s: acknowledged clear %s opened no session", id, pid)
			}
		}
		// Walk the chain.
		cur, steps := l.Root, 0
		for steps <= len(l.Nodes) {
			n, ok := byID[cur]
			if !ok {
				bad("launch %s: session %s missing from the lineage", id, cur)
				break
			}
			if len(n.Children) == 0 {
				if n.Stopped {
					bad("launch %s: the last session %s is stopped (%s)", id, cur, n.StopReason)
				}
				if cur != l.Default {
					bad("launch %s: default session is %s, the chain ends at %s", id, l.Default, cur)
				}
				break
			}
			if !n.Stopped || n.StopReason != "PROVIDER_SESSION_CLEAR" {
				bad("launch %s: %s has a child but is not stopped by a provider clear (stopped=%v %q)", id, cur, n.Stopped, n.StopReason)
			}
			cur = n.Children[0]
			steps++
		}
	}
	r.Ok = len(r.Violations) == 0
	return r
}

// Summary is one line, plus the first violations.
func (r BoundaryResult) Summary() string {
	return Summarize("boundaries", r.Violations, fmt.Sprintf("%d launch(es), %d acknowledged clears (each delivered 3× concurrently), %d sessions", r.Launches, r.Clears, r.Sessions))
}
