package api

import (
	"slices"

	"github.com/fak-dev/fak/cluster"
)

// defaultNode is where a new session's first epoch runs when the caller
// names no node: this node, unless it is draining or its record lacks the
// runtime; then the least loaded alive node that is not and has it (the
// local replica's view is enough: a placement is a preference the move
// controller can still correct, and the FSM refuses a runtime no node
// has).
func (s *Server) defaultNode(runtime string) string {
	self := s.cfg.NodeName
	nodes, err := s.fsm.Nodes()
	if err != nil || len(nodes) == 0 {
		return self
	}
	unfit := map[string]bool{}
	for _, n := range nodes {
		unfit[n.Name] = n.Draining || !slices.Contains(n.RuntimeAdapters, runtime)
	}
	if !unfit[self] {
		return self
	}
	alive := map[string]bool{}
	for _, m := range s.cluster.Members() {
		alive[m.Name] = m.Status == cluster.StatusAlive
	}
	load, _, _, err := s.fsm.PlacementScan(nil)
	if err != nil {
		return self
	}
	best, bestLoad := "", 0
	for _, n := range nodes {
		if unfit[n.Name] || !alive[n.Name] {
			continue
		}
		if l := load[n.Name]; best == "" || l < bestLoad || (l == bestLoad && n.Name < best) {
			best, bestLoad = n.Name, l
		}
	}
	if best == "" {
		return self
	}
	return best
}
