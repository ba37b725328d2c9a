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

// CapabilityVersion is bumped when controls are added or change meaning.
const CapabilityVersion = 3

// Control names, as clients see them in the capability set.
const (
	ControlInputText      = "input.text"
	ControlLeaseTake      = "lease.take"
	ControlLeaseRelease   = "lease.release"
	ControlLeaseSteal     = "lease.steal"
	ControlApprovalAnswer = "approval.answer"
	ControlSessionStop    = "session.stop"
	ControlDetach         = "detach"
	// The reset ledger (DESIGN.md §5).
	ControlSessionFresh = "session.fresh"
	ControlSessionReset = "session.reset"
	ControlSessionClear = "session.clear"
	ControlSessionNew   = "session.new"
	ControlSessionFork  = "session.fork"
	// Moving the session to another node or placement (DESIGN.md §8).
	ControlSessionMove = "session.move"
)

// describe builds the session descriptor as attachmentID (may be empty)
// sees it. Presence and lease expiry are judged by this node's clock: the
// descriptor is a view; the FSM decides by command time.
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
	attached := false
	for _, a := range ats {
		d.Attachments = append(d.Attachments, attachmentToAPI(a, now, sess.Lease))
		if a.AttachmentId == attachmentID {
			attached = true
		}
	}
	if attachmentID != "" && !attached {
		attachmentID = "" // detached or expired: describe as an observer
	}
	d.Capabilities = capabilities(sess, attachmentID, now)
	if env, err := s.fsm.Envelope(sess.EnvelopeId); err == nil {
		d.Budget = envelopeToAPI(env)
	}
	return d, nil
}

// capabilities lists every control with its availability for one
// attachment ("" = an observer that has not attached).
func capabilities(s *fsmpb.Session, attachmentID string, now int64) *fakv1.CapabilitySet {
	active := s.State == fsmpb.SessionState_SESSION_STATE_ACTIVE
	holder := fsm.LeaseHolder(s, now)
	heldByOther := holder != "" && holder != attachmentID
	holderName := ""
	if holder != "" {
		holderName = s.Lease.ClientKind + " " + s.Lease.ClientName
	}
	on := func(name string) *fakv1.Control { return &fakv1.Control{Name: name, Available: true} }
	off := func(name, reason, msg, handoff string) *fakv1.Control {
		return &fakv1.Control{Name: name, Reason: reason, Message: msg, Handoff: handoff}
	}
	stopped := func(name string) *fakv1.Control {
		return off(name, string(fsm.ReasonSessionStopped), "the session is stopped ("+s.StopReason+")", "fakctl session describe "+s.SessionId)
	}
	notAttached := func(name string) *fakv1.Control {
		return off(name, "NOT_ATTACHED", "attach to the session first", "attach")
	}
	var cs []*fakv1.Control
	// input.text
	switch {
	case !active:
		cs = append(cs, stopped(ControlInputText))
	case attachmentID == "":
		cs = append(cs, notAttached(ControlInputText))
	case holder == attachmentID:
		cs = append(cs, on(ControlInputText))
	case heldByOther:
		cs = append(cs, off(ControlInputText, string(fsm.ReasonLeaseNotHeld), "the input lease is held by "+holderName, ControlLeaseSteal))
	default:
		cs = append(cs, off(ControlInputText, string(fsm.ReasonLeaseNotHeld), "take the input lease first", ControlLeaseTake))
	}
	// lease.take
	switch {
	case !active:
		cs = append(cs, stopped(ControlLeaseTake))
	case attachmentID == "":
		cs = append(cs, notAttached(ControlLeaseTake))
	case holder == attachmentID:
		cs = append(cs, off(ControlLeaseTake, "ALREADY_HELD", "this attachment holds the lease", ControlLeaseRelease))
	case heldByOther:
		cs = append(cs, off(ControlLeaseTake, string(fsm.ReasonLeaseHeld), "the input lease is held by "+holderName, ControlLeaseSteal))
	default:
		cs = append(cs, on(ControlLeaseTake))
	}
	// lease.release
	switch {
	case attachmentID == "":
		cs = append(cs, notAttached(ControlLeaseRelease))
	case holder == attachmentID:
		cs = append(cs, on(ControlLeaseRelease))
	default:
		cs = append(cs, off(ControlLeaseRelease, string(fsm.ReasonLeaseNotHeld), "this attachment does not hold the lease", ControlLeaseTake))
	}
	// lease.steal
	switch {
	case !active:
		cs = append(cs, stopped(ControlLeaseSteal))
	case attachmentID == "":
		cs = append(cs, notAttached(ControlLeaseSteal))
	case heldByOther:
		cs = append(cs, on(ControlLeaseSteal))
	default:
		cs = append(cs, off(ControlLeaseSteal, "NOT_HELD_BY_OTHER", "no other attachment holds the lease", ControlLeaseTake))
	}
	// approval.answer
	switch {
	case attachmentID == "":
		cs = append(cs, notAttached(ControlApprovalAnswer))
	case s.PendingApprovalSeq != 0 && (s.Approval == nil || !s.Approval.Answered):
		cs = append(cs, on(ControlApprovalAnswer))
	default:
		cs = append(cs, off(ControlApprovalAnswer, string(fsm.ReasonNoPendingApproval), "no approval is pending", ""))
	}
	// session.stop
	if active {
		cs = append(cs, on(ControlSessionStop))
	} else {
		cs = append(cs, stopped(ControlSessionStop))
	}
	// The ledger: fresh, clear, new and fork need an active session; reset
	// also needs no turn in flight. Fork works on stopped sessions too (a
	// branch from an audited record).
	for _, name := range []string{ControlSessionFresh, ControlSessionReset, ControlSessionClear, ControlSessionNew} {
		switch {
		case !active:
			cs = append(cs, stopped(name))
		case name == ControlSessionReset && s.TurnInputSeq != 0:
			cs = append(cs, off(name, string(fsm.ReasonBusy), "a turn is in flight; reset when it completes", ""))
		default:
			cs = append(cs, on(name))
		}
	}
	cs = append(cs, on(ControlSessionFork))
	// session.move: one move at a time, on an active session.
	switch {
	case !active:
		cs = append(cs, stopped(ControlSessionMove))
	case fsm.MoveOpen(s.Move):
		cs = append(cs, off(ControlSessionMove, string(fsm.ReasonBusy),
			"move "+s.Move.MoveId+" is in progress ("+s.Move.State+")", "fakctl session move-status "+s.SessionId))
	default:
		cs = append(cs, on(ControlSessionMove))
	}
	// detach
	if attachmentID != "" {
		cs = append(cs, on(ControlDetach))
	} else {
		cs = append(cs, notAttached(ControlDetach))
	}
	return &fakv1.CapabilitySet{Version: CapabilityVersion, Controls: cs}
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
