package api

import (
	"context"
	"sync"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/cluster"
)

// statusFanoutTimeout bounds each peer call of Status(all).
const statusFanoutTimeout = 2 * time.Second

type clusterHandler struct {
	fakv1connect.UnimplementedClusterServiceHandler
	s *Server
}

func (h *clusterHandler) Members(ctx context.Context, req *connect.Request[fakv1.MembersRequest]) (*connect.Response[fakv1.MembersResponse], error) {
	resp := &fakv1.MembersResponse{}
	for _, m := range h.s.cluster.Members() {
		resp.Members = append(resp.Members, &fakv1.Member{
			Name: m.Name, GossipAddr: m.GossipAddr, ApiAddr: m.Meta.APIAddr,
			RaftAddr: m.Meta.RaftAddr, Status: m.Status, Voter: m.Meta.Voter,
		})
	}
	return connect.NewResponse(resp), nil
}

func (h *clusterHandler) RaftPeers(ctx context.Context, req *connect.Request[fakv1.RaftPeersRequest]) (*connect.Response[fakv1.RaftPeersResponse], error) {
	peers, err := h.s.cluster.Peers()
	if err != nil {
		return nil, toConnectError(err)
	}
	resp := &fakv1.RaftPeersResponse{}
	for _, p := range peers {
		resp.Peers = append(resp.Peers, &fakv1.RaftPeer{Id: p.ID, Address: p.Address, Voter: p.Voter, Leader: p.Leader})
	}
	return connect.NewResponse(resp), nil
}

func statusToAPI(st cluster.Status, apiAddr string) *fakv1.NodeStatus {
	return &fakv1.NodeStatus{
		Name: st.Name, ApiAddr: apiAddr, RaftState: st.State, Term: st.Term,
		LastLogIndex: st.LastLogIndex, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
		LeaderId: st.LeaderID, LeaderApiAddr: st.LeaderAPIAddr,
	}
}

// Status reports this node, or with all = true every member that gossip
// knows, asking each alive one concurrently.
func (h *clusterHandler) Status(ctx context.Context, req *connect.Request[fakv1.StatusRequest]) (*connect.Response[fakv1.StatusResponse], error) {
	self := statusToAPI(h.s.cluster.Status(), h.s.cfg.APIAddr)
	if !req.Msg.All {
		return connect.NewResponse(&fakv1.StatusResponse{Nodes: []*fakv1.NodeStatus{self}}), nil
	}
	members := h.s.cluster.Members()
	out := make([]*fakv1.NodeStatus, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if m.Name == h.s.cfg.NodeName {
			out[i] = self
			continue
		}
		if m.Status != cluster.StatusAlive || m.Meta.APIAddr == "" {
			out[i] = &fakv1.NodeStatus{Name: m.Name, ApiAddr: m.Meta.APIAddr, Error: "member is " + m.Status}
			continue
		}
		wg.Add(1)
		go func(i int, m cluster.Member) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, statusFanoutTimeout)
			defer cancel()
			fwd := connect.NewRequest(&fakv1.StatusRequest{})
			h.s.forwardHeaders(fwd.Header(), req.Header())
			r, err := h.s.peers.get(m.Meta.APIAddr).cluster.Status(cctx, fwd)
			if err != nil || len(r.Msg.Nodes) == 0 {
				msg := "no status"
				if err != nil {
					msg = err.Error()
				}
				out[i] = &fakv1.NodeStatus{Name: m.Name, ApiAddr: m.Meta.APIAddr, Error: msg}
				return
			}
			out[i] = r.Msg.Nodes[0]
		}(i, m)
	}
	wg.Wait()
	return connect.NewResponse(&fakv1.StatusResponse{Nodes: out}), nil
}

func (h *clusterHandler) Leave(ctx context.Context, req *connect.Request[fakv1.LeaveRequest]) (*connect.Response[fakv1.LeaveResponse], error) {
	if h.s.cfg.Leave == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errLeaveUnsupported)
	}
	if err := h.s.cfg.Leave(); err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(&fakv1.LeaveResponse{}), nil
}

func (h *clusterHandler) ReadIndex(ctx context.Context, req *connect.Request[fakv1.ReadIndexRequest]) (*connect.Response[fakv1.ReadIndexResponse], error) {
	idx, err := h.s.cluster.ReadIndexForPeer(ctx, req.Msg.AppliedIndex)
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&fakv1.ReadIndexResponse{Index: idx}), nil
}
