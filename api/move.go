package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Moves and nodes (DESIGN.md §8). MoveSession opens a move with one
// RequestMove command; the controller on the leader drives the rest from
// FSM state, so the RPC returns as soon as the request is committed and
// progress is read from GetMove or the session's move.* events.

// headerMoveID carries the move id the receiving node drew to the leader
// with a forwarded MoveSession (the request has no field for it), so every
// attempt of one request proposes the same move. Honoured only on a
// forwarded call.
const headerMoveID = "Fak-Move-Id"

const moveIDPrefix = "mov_"

// moveIDFor returns the move id a forwarded request carries, or a new one.
func moveIDFor(hdr http.Header) string {
	if hdr.Get(headerForwarded) != "" {
		if id := hdr.Get(headerMoveID); strings.HasPrefix(id, moveIDPrefix) && len(id) <= fsm.MaxSessionIDBytes {
			return id
		}
	}
	return NewID(moveIDPrefix)
}

func (h *sessionHandler) MoveSession(ctx context.Context, req *connect.Request[fakv1.MoveSessionRequest]) (*connect.Response[fakv1.MoveSessionResponse], error) {
	m := req.Msg
	if err := h.s.stampRequestID(&m.RequestId); err != nil {
		return nil, err
	}
	if m.SessionId == "" {
		return nil, invalidArgument("session_id is required")
	}
	for _, f := range [...]struct{ name, v string }{
		{"to_node", m.ToNode}, {"model", m.Model}, {"provider", m.Provider},
		{"runtime_adapter", m.RuntimeAdapter}, {"account_ref", m.AccountRef},
	} {
		if len(f.v) > fsm.MaxPlacementFieldBytes {
			return nil, invalidArgument("%s longer than %d bytes", f.name, fsm.MaxPlacementFieldBytes)
		}
	}
	timeout := time.Duration(m.SafePointTimeoutMs) * time.Millisecond
	switch {
	case m.SafePointTimeoutMs < 0 || timeout > time.Duration(fsm.MaxTTL):
		return nil, invalidArgument("safe_point_timeout_ms must be between 0 (the default, %s) and %d", fsm.DefaultSafePointTimeout, fsm.MaxTTL/1e6)
	case timeout == 0:
		timeout = fsm.DefaultSafePointTimeout
	}
	moveID := moveIDFor(req.Header())
	target := &fsmpb.Placement{
		Node: m.ToNode, Model: m.Model, Provider: m.Provider, RuntimeAdapter: m.RuntimeAdapter, AccountRef: m.AccountRef,
	}
	return onLeader(ctx, h.s, req,
		func(ctx context.Context) (*fakv1.MoveSessionResponse, error) {
			if err := h.s.requireSession(m.SessionId); err != nil {
				return nil, err
			}
			if m.ToNode != "" {
				if err := h.s.requireNode(m.ToNode); err != nil {
					return nil, err
				}
			}
			res, err := h.s.apply(ctx, &fsmpb.Command{RequestId: m.RequestId, Body: &fsmpb.Command_RequestMove{RequestMove: &fsmpb.RequestMove{
				SessionId: m.SessionId, MoveId: moveID, Target: target,
				SafePointTimeoutNanos: int64(timeout), AcceptDegradation: m.AcceptDegradation,
				Cause: h.s.moveCause(m.SessionId), Interrupt: m.Interrupt,
			}}})
			if err != nil {
				return nil, err
			}
			s := res.GetSession()
			return &fakv1.MoveSessionResponse{Move: moveToAPI(s.GetSessionId(), s.GetMove())}, nil
		},
		func(ctx context.Context, p *peerClients, fwd *connect.Request[fakv1.MoveSessionRequest]) (*connect.Response[fakv1.MoveSessionResponse], error) {
			fwd.Header().Set(headerMoveID, moveID) // the id this node drew
			return p.session.MoveSession(ctx, fwd)
		})
}

// moveCause is the cause of an operator's move of a session: recovery
// (a checkpoint at the last committed address, no safe point) when the
// session's compute node is dead in gossip, so a stranded session can be
// moved by hand; operator otherwise.
func (s *Server) moveCause(sessionID string) string {
	ses, err := s.fsm.Session(sessionID)
	if err != nil {
		return fsm.MoveCauseOperator
	}
	if sourceDead(ses.GetPlacement().GetNode(), s.gossipStatus()) {
		return fsm.MoveCauseRecovery
	}
	return fsm.MoveCauseOperator
}

// sourceDead: gossip knows node and says it is dead or has left.
func sourceDead(node string, status map[string]string) bool {
	switch status[node] {
	case cluster.StatusDead, cluster.StatusLeft:
		return true
	}
	return false
}

// requireNode refuses, on the leader, a move to a node without a node
// record: nothing could ever admit it.
func (s *Server) requireNode(name string) error {
	recs, err := s.fsm.Nodes()
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(recs, func(r *fsmpb.NodeRecord) bool { return r.Name == name }) {
		return &fsm.Error{Reason: fsm.ReasonNotFound, Message: fmt.Sprintf("node %s not found (no node record; fakctl node list shows the nodes)", name)}
	}
	return nil
}

// GetMove is a linearizable read of the session's open move, or its last
// finished one.
func (h *sessionHandler) GetMove(ctx context.Context, req *connect.Request[fakv1.GetMoveRequest]) (*connect.Response[fakv1.GetMoveResponse], error) {
	if req.Msg.SessionId == "" {
		return nil, invalidArgument("session_id is required")
	}
	if err := h.s.readBarrier(ctx, req.Header(), fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE); err != nil {
		return nil, toConnectError(err)
	}
	s, err := h.s.fsm.Session(req.Msg.SessionId)
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&fakv1.GetMoveResponse{Move: moveToAPI(s.SessionId, s.Move)}), nil
}

// nodeHandler serves NodeService.
type nodeHandler struct {
	fakv1connect.UnimplementedNodeServiceHandler
	s *Server
}

// nodeLoad is what one pass over the sessions says about each node.
type nodeLoad struct {
	sessions map[string]int // active sessions placed on the node
	moving   map[string]int // of those, sessions with an open move
}

func (s *Server) nodeLoad() (nodeLoad, error) {
	load, moving, _, err := s.fsm.PlacementScan(nil)
	if err != nil {
		return nodeLoad{}, err
	}
	l := nodeLoad{sessions: load, moving: map[string]int{}}
	for _, ses := range moving {
		l.moving[ses.GetPlacement().GetNode()]++
	}
	return l, nil
}

// gossipStatus maps member names to their gossip status.
func (s *Server) gossipStatus() map[string]string {
	out := map[string]string{}
	for _, m := range s.cluster.Members() {
		out[m.Name] = m.Status
	}
	return out
}

// nodeToAPI joins a node record with its gossip status ("unknown" when
// gossip has never seen it) and its load.
func nodeToAPI(rec *fsmpb.NodeRecord, status map[string]string, load nodeLoad) *fakv1.Node {
	st, ok := status[rec.Name]
	if !ok {
		st = "unknown"
	}
	n := &fakv1.Node{
		Name: rec.Name, ApiAddr: rec.ApiAddr, RaftAddr: rec.RaftAddr,
		RuntimeAdapters: rec.RuntimeAdapters, Providers: rec.Providers, Models: rec.Models, AccountRefs: rec.AccountRefs,
		RuntimeMeters: rec.RuntimeMeters,
		Capacity:      rec.Capacity, Draining: rec.Draining, Status: st,
		Sessions: uint32(load.sessions[rec.Name]), Moving: uint32(load.moving[rec.Name]),
		RuleVersion: max(rec.RuleVersion, 1),
	}
	for _, l := range rec.Labels {
		n.Labels = append(n.Labels, &fakv1.Label{Key: l.Key, Value: l.Value})
	}
	return n
}

// ListNodes lists every node record (linearizable), with the serving
// node's view of gossip and the load in its replica.
func (h *nodeHandler) ListNodes(ctx context.Context, req *connect.Request[fakv1.ListNodesRequest]) (*connect.Response[fakv1.ListNodesResponse], error) {
	if err := h.s.readBarrier(ctx, req.Header(), fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE); err != nil {
		return nil, toConnectError(err)
	}
	recs, err := h.s.fsm.Nodes()
	if err != nil {
		return nil, toConnectError(err)
	}
	load, err := h.s.nodeLoad()
	if err != nil {
		return nil, toConnectError(err)
	}
	status := h.s.gossipStatus()
	resp := &fakv1.ListNodesResponse{}
	for _, rec := range recs {
		resp.Nodes = append(resp.Nodes, nodeToAPI(rec, status, load))
	}
	return connect.NewResponse(resp), nil
}

// DrainNode sets or clears a node's draining flag (on the leader). The
// controller stops admitting sessions to a draining node and moves its
// sessions away one by one.
// BlockedSession is a session no node admits, with every candidate's
// failed admission checks (placement.Refusals).
type BlockedSession struct{ SessionID, Refusals string }

// DrainStatus answers from the leader, whose move controller is the one
// that knows.
func (h *nodeHandler) DrainStatus(ctx context.Context, req *connect.Request[fakv1.DrainStatusRequest]) (*connect.Response[fakv1.DrainStatusResponse], error) {
	m := req.Msg
	if m.Node == "" || len(m.Node) > fsm.MaxPlacementFieldBytes {
		return nil, invalidArgument("node must be 1-%d bytes", fsm.MaxPlacementFieldBytes)
	}
	return onLeader(ctx, h.s, req,
		func(context.Context) (*fakv1.DrainStatusResponse, error) {
			out := &fakv1.DrainStatusResponse{}
			if h.s.cfg.Blocked != nil {
				for _, b := range h.s.cfg.Blocked(m.Node) {
					out.Blocked = append(out.Blocked, &fakv1.BlockedSession{SessionId: b.SessionID, Refusals: b.Refusals})
				}
			}
			return out, nil
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.DrainStatusRequest]) (*connect.Response[fakv1.DrainStatusResponse], error) {
			return p.node.DrainStatus(ctx, r)
		})
}

func (h *nodeHandler) DrainNode(ctx context.Context, req *connect.Request[fakv1.DrainNodeRequest]) (*connect.Response[fakv1.DrainNodeResponse], error) {
	m := req.Msg
	if m.Node == "" || len(m.Node) > fsm.MaxPlacementFieldBytes {
		return nil, invalidArgument("node must be 1-%d bytes", fsm.MaxPlacementFieldBytes)
	}
	return write(ctx, h.s, req, "",
		func() *fsmpb.Command {
			return &fsmpb.Command{Body: &fsmpb.Command_SetDraining{SetDraining: &fsmpb.SetDraining{Node: m.Node, Draining: m.Draining}}}
		},
		func(res *fsmpb.Result) *fakv1.DrainNodeResponse {
			load, err := h.s.nodeLoad()
			if err != nil {
				h.s.log(ctx).Warn("drain: node load", "error", err)
			}
			return &fakv1.DrainNodeResponse{Node: nodeToAPI(res.GetNode(), h.s.gossipStatus(), load)}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.DrainNodeRequest]) (*connect.Response[fakv1.DrainNodeResponse], error) {
			return p.node.DrainNode(ctx, r)
		})
}
