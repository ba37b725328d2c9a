package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/fak-dev/fak/cluster"
)

// Readiness (GET /v1/health/ready) means this node serves the fleet's
// present state: a leader is known, this node's FSM has applied the
// leader's commit index as of the check, and its latest stores succeeded.
// A follower's own commit index is no measure of that: it only advances
// as far as the follower's log, so a follower that cannot store an entry
// (a full disk) had its applied index equal to its commit index and was
// "ready" thousands of entries behind. The leader's index comes from the
// leader itself (its /v1/health, unauthenticated like this check).
const (
	// readyWait bounds how long ready waits for the FSM to apply the
	// leader's index: under load a follower trails the leader by a few
	// entries at any instant, which is not "behind".
	readyWait = 2 * time.Second
	// readyMaxLag: a node more than this many entries behind the leader's
	// index is answered "catching up" at once, without waiting (at the
	// fleet's measured 3,000–6,600 entries a second that is well under the
	// wait; a node that far behind is replaying or cut off).
	readyMaxLag = 1000
)

// ready answers plain JSON: 200 "ready", else 503 with status "halted: …"
// (its build lacks the rules of an entry), "storage failing: …" (its
// latest write of the FSM database, the Raft log or a snapshot failed),
// "no leader", "leader unreachable: …" or "catching up: applied X of
// leader's Y". Unauthenticated, like /v1/health: it carries no data, and
// health checks have no token.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	st := s.cluster.Status()
	status, code := "ready", http.StatusOK
	var target uint64
	switch {
	case s.fsm.Halted() != nil:
		// Never ready again under this build (fsm/rules.go).
		status, code = "halted: "+s.fsm.Halted().Error(), http.StatusServiceUnavailable
	case s.cluster.StoreFailed() != nil:
		status, code = "storage failing: "+s.cluster.StoreFailed().Detail(), http.StatusServiceUnavailable
	case st.LeaderID == "":
		status, code = "no leader", http.StatusServiceUnavailable
	default:
		ctx, cancel := context.WithTimeout(r.Context(), readyWait)
		defer cancel()
		var err error
		if target, err = s.leaderIndex(ctx, st); err != nil {
			status, code = "leader unreachable: "+err.Error(), http.StatusServiceUnavailable
			break
		}
		if st.AppliedIndex+readyMaxLag < target || s.cluster.WaitApplied(ctx, target) != nil {
			status, code = fmt.Sprintf("catching up: applied %d of leader's %d", s.fsm.AppliedIndex(), target), http.StatusServiceUnavailable
		}
		st.AppliedIndex = s.fsm.AppliedIndex()
		// A store may have failed while it waited.
		if e := s.cluster.StoreFailed(); e != nil {
			status, code = "storage failing: "+e.Detail(), http.StatusServiceUnavailable
		}
	}
	body := map[string]any{
		"node":          st.Name,
		"raft_state":    st.State,
		"leader":        st.LeaderID,
		"applied_index": st.AppliedIndex,
		"commit_index":  st.CommitIndex,
		"status":        status,
	}
	if target > 0 {
		body["leader_index"] = target
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// leaderIndex is the index this node must have applied to be ready: its
// own commit index when it leads, else the applied index the leader
// reports (which trails the leader's commit index by the entries it is
// applying at that instant).
func (s *Server) leaderIndex(ctx context.Context, st cluster.Status) (uint64, error) {
	if st.LeaderID == st.Name {
		return st.CommitIndex, nil
	}
	addr := st.LeaderAPIAddr
	if addr == "" {
		return 0, fmt.Errorf("%s's API address is not known yet", st.LeaderID)
	}
	if !strings.Contains(addr, "://") {
		addr = s.peers.scheme + "://" + addr
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+"/v1/health", nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.peers.httpClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", st.LeaderID, err)
	}
	defer resp.Body.Close()
	var h struct {
		Node         string `json:"node"`
		Leader       string `json:"leader"`
		AppliedIndex uint64 `json:"applied_index"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return 0, fmt.Errorf("%s: health: HTTP %d: %w", st.LeaderID, resp.StatusCode, err)
	}
	if h.Leader != h.Node {
		return 0, errors.New(st.LeaderID + " no longer leads")
	}
	return h.AppliedIndex, nil
}
