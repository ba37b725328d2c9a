package api

import (
	"context"
	"net/http"
	"slices"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// describe builds the session descriptor as attachmentID (may be empty)
// sees it, with the caller's token role (from ctx). Presence and lease
// expiry are judged by this node's clock: the descriptor is a view; the
// FSM decides by command time.
func (s *Server) describe(ctx context.Context, hdr http.Header, sessionID, attachmentID string, c fakv1.ReadConsistency) (*fakv1.DescribeSessionResponse, error) {
	if err := s.readBarrier(ctx, hdr, c); err != nil {
		return nil, toConnectError(err)
	}
	sess, err := s.fsm.Session(sessionID)
	if err != nil {
		return nil, toConnectError(err)
	}
	ats, err := s.fsm.Attachments(sessionID)
	if err != nil {
		return nil, toConnectError(err)
	}
	now := time.Now().UnixNano()
	d := &fakv1.DescribeSessionResponse{Session: sessionToAPI(sess), ComputeNode: sess.GetPlacement().GetNode()}
	var caller *fsmpb.Attachment // nil (detached, expired or none): describe as an observer
	for _, a := range ats {
		d.Attachments = append(d.Attachments, attachmentToAPI(a, now, sess.Lease))
		if attachmentID != "" && a.AttachmentId == attachmentID {
			caller = a
		}
	}
	d.Capabilities = capabilitiesToAPI(fsm.Capabilities(sess, caller, fsmRole(callerRole(ctx)), now))
	if env, err := s.fsm.Envelope(sess.EnvelopeId); err == nil {
		d.Budget = envelopeToAPI(env)
	}
	if p := sess.GetPlacement(); p.GetNode() != "" {
		if recs, err := s.fsm.Nodes(); err == nil {
			for _, rec := range recs {
				if rec.Name == p.Node {
					d.MeteredBy = fsm.MeteredBy(rec, p.RuntimeAdapter)
				}
			}
		}
	}
	return d, nil
}

// fsmRole is the API role as the capability set judges it (fsm.Role);
// unspecified is no role at all.
func fsmRole(r fakv1.Role) fsm.Role {
	switch r {
	case RoleRead:
		return fsm.RoleRead
	case RoleAgent:
		return fsm.RoleAgent
	case RoleOperator:
		return fsm.RoleOperator
	}
	return ""
}

// capabilitiesToAPI is the capability set (fsm.Capabilities) as the API
// message.
func capabilitiesToAPI(caps []fsm.Capability) *fakv1.CapabilitySet {
	cs := make([]*fakv1.Control, len(caps))
	for i, c := range caps {
		cs[i] = &fakv1.Control{Name: c.Control, Available: c.Available, Reason: string(c.Reason), Message: c.Message, Handoff: c.Handoff}
	}
	return &fakv1.CapabilitySet{Version: fsm.CapabilityVersion, Controls: cs}
}

func (h *sessionHandler) DescribeSession(ctx context.Context, req *connect.Request[fakv1.DescribeSessionRequest]) (*connect.Response[fakv1.DescribeSessionResponse], error) {
	if req.Msg.SessionId == "" {
		return nil, invalidArgument("session_id is required")
	}
	d, err := h.s.describe(ctx, req.Header(), req.Msg.SessionId, req.Msg.AttachmentId, req.Msg.Consistency)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(d), nil
}

func (h *sessionHandler) DiscoverSession(ctx context.Context, req *connect.Request[fakv1.DiscoverSessionRequest]) (*connect.Response[fakv1.DiscoverSessionResponse], error) {
	if req.Msg.SessionId == "" {
		return nil, invalidArgument("session_id is required")
	}
	if err := h.s.readBarrier(ctx, req.Header(), fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE); err != nil {
		return nil, toConnectError(err)
	}
	sess, err := h.s.fsm.Session(req.Msg.SessionId)
	if err != nil {
		return nil, toConnectError(err)
	}
	compute := sess.GetPlacement().GetNode()
	leaderID, _ := h.s.cluster.Leader()
	var eps []*fakv1.Endpoint
	for _, m := range h.s.cluster.Members() {
		if m.Meta.APIAddr == "" {
			continue
		}
		ep := &fakv1.Endpoint{Node: m.Name, ApiAddr: m.Meta.APIAddr, Status: m.Status}
		if m.Name == compute {
			ep.Roles = append(ep.Roles, "compute")
		}
		if m.Name == leaderID {
			ep.Roles = append(ep.Roles, "leader")
		}
		if len(ep.Roles) == 0 {
			ep.Roles = []string{"replica"}
		}
		eps = append(eps, ep)
	}
	rank := func(e *fakv1.Endpoint) int {
		r := 0
		if e.Status != cluster.StatusAlive {
			r += 2
		}
		if !slices.Contains(e.Roles, "compute") {
			r++
		}
		return r
	}
	slices.SortStableFunc(eps, func(a, b *fakv1.Endpoint) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		if a.Node < b.Node {
			return -1
		}
		return 1
	})
	return connect.NewResponse(&fakv1.DiscoverSessionResponse{
		SessionId: sess.SessionId, Epoch: sess.Epoch, Placement: placementToAPI(sess.Placement),
		ComputeNode: compute, Endpoints: eps,
	}), nil
}
