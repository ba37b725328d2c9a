package api

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// overviewStatusTimeout bounds each node's Status call of an overview: an
// overview is polled, and one slow node must not hold up the whole answer.
const overviewStatusTimeout = time.Second

// Overview answers the whole fleet in one call: the union of node records,
// gossip members and Raft servers, each with its own Raft status (asked in
// parallel), and one page of sessions with the counts over all of them.
func (h *clusterHandler) Overview(ctx context.Context, req *connect.Request[fakv1.OverviewRequest]) (*connect.Response[fakv1.OverviewResponse], error) {
	m := req.Msg
	after, err := decodeOverviewToken(m.PageToken)
	if err != nil {
		return nil, err
	}
	if err := h.s.readBarrier(ctx, req.Header(), m.Consistency); err != nil {
		return nil, toConnectError(err)
	}
	// Ask the nodes while the replica is read.
	members := h.s.cluster.Members()
	statusCh := make(chan map[string]*fakv1.NodeStatus, 1)
	go func() { statusCh <- h.s.nodeStatuses(ctx, req.Header(), members) }()

	fleet, err := h.s.fsm.Fleet(after, pageSize(m.PageSize), m.IncludeStopped)
	statuses := <-statusCh
	if err != nil {
		return nil, toConnectError(err)
	}
	peers, err := h.s.cluster.Peers()
	if err != nil {
		// The configuration is unknown here: roles come from each node's
		// own status instead.
		peers = nil
	}
	leader, _ := h.s.cluster.Leader()
	now := time.Now()
	resp := &fakv1.OverviewResponse{
		Nodes:           overviewNodes(fleet, members, peers, statuses, leader, h.s.cfg.NodeName),
		Leader:          leader,
		AppliedIndex:    fleet.AppliedIndex,
		SessionsActive:  uint32(fleet.Active),
		SessionsStopped: uint32(fleet.Stopped),
		MovesOpen:       uint32(fleet.MovesOpen),
		SessionsPurged:  fleet.Purged,
		StateBytes:      fleet.StateBytes,
	}
	for _, fs := range fleet.Sessions {
		resp.Sessions = append(resp.Sessions, overviewSession(fs, now.UnixNano()))
	}
	if fleet.More && len(fleet.Sessions) > 0 {
		resp.NextPageToken = encodeOverviewToken(fleet.Sessions[len(fleet.Sessions)-1].Session.SessionId)
	}
	resp.GeneratedUnixNano = time.Now().UnixNano()
	return connect.NewResponse(resp), nil
}

// The page token is the last session id of the page, base64url-encoded so
// clients treat it as opaque.
func encodeOverviewToken(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

func decodeOverviewToken(tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) == 0 {
		return "", invalidArgument("page_token %q is not a token this service issued", tok)
	}
	return string(b), nil
}

// nodeStatuses asks every alive member (this node answers for itself) for
// its Raft status, in parallel, each bounded by overviewStatusTimeout.
// Members it could not ask or that failed map to a status with Error set.
func (s *Server) nodeStatuses(ctx context.Context, hdr http.Header, members []cluster.Member) map[string]*fakv1.NodeStatus {
	out := make(map[string]*fakv1.NodeStatus, len(members))
	var mu sync.Mutex
	var wg sync.WaitGroup
	set := func(name string, st *fakv1.NodeStatus) {
		mu.Lock()
		out[name] = st
		mu.Unlock()
	}
	set(s.cfg.NodeName, statusToAPI(s.cluster.Status(), s.cfg.APIAddr))
	for _, m := range members {
		if m.Name == s.cfg.NodeName {
			continue
		}
		if m.Status != cluster.StatusAlive || m.Meta.APIAddr == "" {
			set(m.Name, &fakv1.NodeStatus{Name: m.Name, ApiAddr: m.Meta.APIAddr, Error: "member is " + m.Status})
			continue
		}
		wg.Add(1)
		go func(m cluster.Member) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, overviewStatusTimeout)
			defer cancel()
			fwd := connect.NewRequest(&fakv1.StatusRequest{})
			s.forwardHeaders(fwd.Header(), hdr)
			r, err := s.peers.get(m.Meta.APIAddr).cluster.Status(cctx, fwd)
			if err != nil || len(r.Msg.Nodes) == 0 {
				msg := "no status"
				if err != nil {
					msg = err.Error()
				}
				set(m.Name, &fakv1.NodeStatus{Name: m.Name, ApiAddr: m.Meta.APIAddr, Error: msg})
				return
			}
			set(m.Name, r.Msg.Nodes[0])
		}(m)
	}
	wg.Wait()
	return out
}

// overviewNodes joins, by name, the node records, the gossip members, the
// Raft configuration and the nodes' own statuses; ordered by name.
func overviewNodes(fleet *fsm.Fleet, members []cluster.Member, peers []cluster.Peer,
	statuses map[string]*fakv1.NodeStatus, leader, self string,
) []*fakv1.OverviewNode {
	records := map[string]*fsmpb.NodeRecord{}
	gossip := map[string]cluster.Member{}
	raftPeers := map[string]cluster.Peer{}
	names := map[string]bool{}
	for _, r := range fleet.Nodes {
		records[r.Name], names[r.Name] = r, true
	}
	for _, m := range members {
		gossip[m.Name], names[m.Name] = m, true
	}
	for _, p := range peers {
		raftPeers[p.ID], names[p.ID] = p, true
	}

	// Lag is measured against the leader's commit index as the leader
	// reports it, or, when it could not be asked, the highest any node
	// reported (followers learn the commit index from the leader).
	var commit uint64
	if st, ok := statuses[leader]; ok && st.Error == "" {
		commit = st.CommitIndex
	} else {
		for _, st := range statuses {
			if st.Error == "" {
				commit = max(commit, st.CommitIndex)
			}
		}
	}

	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	out := make([]*fakv1.OverviewNode, 0, len(sorted))
	for _, name := range sorted {
		rec, m, st := records[name], gossip[name], statuses[name]
		peer, inRaft := raftPeers[name]
		n := &fakv1.OverviewNode{
			Name:           name,
			ApiAddr:        m.Meta.APIAddr,
			GossipStatus:   m.Status,
			Leader:         name == leader,
			SessionsHosted: uint32(fleet.Hosted[name]),
		}
		if n.GossipStatus == "" {
			n.GossipStatus = "unknown"
		}
		if rec != nil {
			if n.ApiAddr == "" {
				n.ApiAddr = rec.ApiAddr
			}
			n.Capacity, n.Draining = rec.Capacity, rec.Draining
			for _, l := range rec.Labels {
				n.Labels = append(n.Labels, &fakv1.Label{Key: l.Key, Value: l.Value})
			}
		}
		switch {
		case st == nil && name != self:
			n.Error = "not a gossip member"
		case st != nil && st.Error != "":
			n.Error = st.Error
		case st != nil:
			n.AppliedIndex, n.Term = st.AppliedIndex, st.Term
			if commit > st.AppliedIndex {
				n.AppliedLag = commit - st.AppliedIndex
			}
		}
		n.RaftRole = raftRole(peers != nil, inRaft, peer, st, name == leader)
		out = append(out, n)
	}
	return out
}

// raftRole names a node's part in Raft. The configuration decides whether
// it is a voter at all; a reachable voter's own state decides the rest, an
// unreachable one is a follower unless it is the leader we know of.
func raftRole(configKnown, inRaft bool, peer cluster.Peer, st *fakv1.NodeStatus, leader bool) string {
	if configKnown && !inRaft {
		return "none"
	}
	if inRaft && !peer.Voter {
		return "nonvoter"
	}
	if st != nil && st.Error == "" {
		switch s := strings.ToLower(st.RaftState); s {
		case "leader", "follower", "candidate":
			return s
		}
	}
	if leader {
		return "leader"
	}
	if !configKnown {
		return "none"
	}
	return "follower"
}

// overviewSession is a session's line in the overview. A lease past its
// expiry (by this node's clock) is shown free, as the FSM treats it.
func overviewSession(fs fsm.FleetSession, now int64) *fakv1.OverviewSession {
	s := fs.Session
	o := &fakv1.OverviewSession{
		SessionId: s.SessionId, Title: s.Title, State: fakv1.SessionState(s.State),
		Node: s.GetPlacement().GetNode(), Epoch: s.Epoch, HeadSeq: s.HeadSeq,
		AttachmentCount: s.Attachments, Stranded: s.Stranded,
	}
	if l := s.GetLease(); l.GetAttachmentId() != "" && l.GetExpiresUnixNano() > now {
		o.LeaseHolder = l.AttachmentId
		o.LeaseHolderLabel = clientLabel(l.ClientKind, l.ClientName)
		if a := fs.LeaseHolder; a != nil {
			o.LeaseHolderLabel = clientLabel(a.ClientKind, a.ClientName)
		}
	}
	if fsm.MoveOpen(s.Move) {
		o.OpenMove = moveToAPI(s.SessionId, s.Move)
	}
	if e := fs.Envelope; e != nil && limited(e.GetLimits()) {
		o.BudgetRemaining = envelopeToAPI(e).Remaining
	}
	return o
}

// limited reports whether a budget limits any axis (zero is unlimited).
func limited(b *fsmpb.Budget) bool {
	return b.GetTurns() != 0 || b.GetOutputTokens() != 0 || b.GetQueries() != 0 ||
		b.GetSpendMicros() != 0 || b.GetToolCalls() != 0
}

// clientLabel names a client "terminal alice"; a name equal to its kind is
// said once.
func clientLabel(kind, name string) string {
	switch {
	case name == "" || name == kind:
		return kind
	case kind == "":
		return name
	}
	return kind + " " + name
}
