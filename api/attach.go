package api

import (
	"context"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Attachment and lease timing. An attachment lives AttachmentTTL past its
// last keep-alive; clients renew every AttachmentKeepAlive. The input lease
// is short (DESIGN.md §7) and renewed by its holder every LeaseTTL/3.
// These are the defaults; Config.LeaseTTL and Config.AttachmentTTL override
// them (tests shorten them).
const (
	AttachmentTTL       = 30 * time.Second
	AttachmentKeepAlive = 10 * time.Second
	LeaseTTL            = 15 * time.Second
)

func (h *sessionHandler) Attach(ctx context.Context, req *connect.Request[fakv1.AttachRequest]) (*connect.Response[fakv1.AttachResponse], error) {
	m := req.Msg
	reqID := NewID("req_") // fixed before any retry, so a retried write is deduplicated
	if m.SessionId == "" || m.ClientKind == "" {
		return nil, invalidArgument("session_id and client_kind are required")
	}
	id := NewID("att_")
	// The node the client attached through: this one, or the follower that
	// forwarded the call here.
	via := h.s.cfg.NodeName
	if fwd := req.Header().Get(headerForwarded); fwd != "" {
		via = fwd
	}
	resp, err := write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: reqID, Body: &fsmpb.Command_Attach{Attach: &fsmpb.Attach{
				SessionId: m.SessionId, AttachmentId: id, ClientKind: m.ClientKind, ClientName: m.ClientName,
				Capabilities: m.Capabilities, Node: via, TtlNanos: int64(h.s.cfg.AttachmentTTL),
			}}}
		},
		func(res *fsmpb.Result) *fakv1.AttachResponse {
			return &fakv1.AttachResponse{AttachmentId: res.GetAttachment().GetAttachmentId(),
				TtlMs: h.s.cfg.AttachmentTTL.Milliseconds(), KeepaliveMs: min(AttachmentKeepAlive, h.s.cfg.AttachmentTTL/3).Milliseconds()}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.AttachRequest]) (*connect.Response[fakv1.AttachResponse], error) {
			return p.session.Attach(ctx, r)
		})
	if err != nil {
		return nil, err
	}
	// The descriptor as the new attachment sees it; the attach has committed,
	// so a linearizable describe on this node includes it.
	if d, derr := h.s.describe(ctx, req.Header(), m.SessionId, resp.Msg.AttachmentId, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE); derr == nil {
		resp.Msg.Descriptor_ = d
	}
	return resp, nil
}

func (h *sessionHandler) KeepAlive(ctx context.Context, req *connect.Request[fakv1.KeepAliveRequest]) (*connect.Response[fakv1.KeepAliveResponse], error) {
	m := req.Msg
	reqID := NewID("req_") // fixed before any retry, so a retried write is deduplicated
	if m.SessionId == "" || m.AttachmentId == "" {
		return nil, invalidArgument("session_id and attachment_id are required")
	}
	return write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: reqID, Body: &fsmpb.Command_KeepAlive{KeepAlive: &fsmpb.KeepAlive{
				SessionId: m.SessionId, AttachmentId: m.AttachmentId, TtlNanos: int64(h.s.cfg.AttachmentTTL),
			}}}
		},
		func(res *fsmpb.Result) *fakv1.KeepAliveResponse {
			return &fakv1.KeepAliveResponse{ExpiresUnixNano: res.GetAttachment().GetExpiresUnixNano()}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.KeepAliveRequest]) (*connect.Response[fakv1.KeepAliveResponse], error) {
			return p.session.KeepAlive(ctx, r)
		})
}

func (h *sessionHandler) Detach(ctx context.Context, req *connect.Request[fakv1.DetachRequest]) (*connect.Response[fakv1.DetachResponse], error) {
	m := req.Msg
	reqID := NewID("req_") // fixed before any retry, so a retried write is deduplicated
	if m.SessionId == "" || m.AttachmentId == "" {
		return nil, invalidArgument("session_id and attachment_id are required")
	}
	return write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: reqID, Body: &fsmpb.Command_Detach{Detach: &fsmpb.Detach{
				SessionId: m.SessionId, AttachmentId: m.AttachmentId,
			}}}
		},
		func(res *fsmpb.Result) *fakv1.DetachResponse { return &fakv1.DetachResponse{NoOp: res.GetNoOp()} },
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.DetachRequest]) (*connect.Response[fakv1.DetachResponse], error) {
			return p.session.Detach(ctx, r)
		})
}

func (h *sessionHandler) Act(ctx context.Context, req *connect.Request[fakv1.ActRequest]) (*connect.Response[fakv1.ActResponse], error) {
	m := req.Msg
	if err := h.s.stampRequestID(&m.RequestId); err != nil {
		return nil, err
	}
	if m.SessionId == "" || m.AttachmentId == "" {
		return nil, invalidArgument("session_id and attachment_id are required")
	}
	// Each action is one FSM command; both answer the address of the event
	// they committed (the input, or the turn.completed of the interrupt).
	var cmd *fsmpb.Command
	switch a := m.Action.(type) {
	case *fakv1.ActRequest_Input:
		if a.Input.GetText() == "" || len(a.Input.GetText()) > fsm.MaxInputBytes {
			return nil, invalidArgument("input text must be 1-%d bytes", fsm.MaxInputBytes)
		}
		cmd = &fsmpb.Command{RequestId: m.RequestId, Body: &fsmpb.Command_SubmitInput{SubmitInput: &fsmpb.SubmitInput{
			SessionId: m.SessionId, AttachmentId: m.AttachmentId, ExpectedEpoch: m.ExpectedEpoch, Text: a.Input.GetText(),
		}}}
	case *fakv1.ActRequest_Interrupt:
		cmd = &fsmpb.Command{RequestId: m.RequestId, Body: &fsmpb.Command_InterruptTurn{InterruptTurn: &fsmpb.InterruptTurn{
			SessionId: m.SessionId, AttachmentId: m.AttachmentId, ExpectedEpoch: m.ExpectedEpoch,
		}}}
	default:
		return nil, invalidArgument("an action is required (input or interrupt)")
	}
	return write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command { return cmd },
		func(res *fsmpb.Result) *fakv1.ActResponse {
			return &fakv1.ActResponse{SessionId: res.GetAppend().GetSessionId(), Seq: res.GetAppend().GetFirstSeq()}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.ActRequest]) (*connect.Response[fakv1.ActResponse], error) {
			return p.session.Act(ctx, r)
		})
}

func (h *sessionHandler) TakeLease(ctx context.Context, req *connect.Request[fakv1.TakeLeaseRequest]) (*connect.Response[fakv1.TakeLeaseResponse], error) {
	m := req.Msg
	reqID := NewID("req_") // fixed before any retry, so a retried write is deduplicated
	if m.SessionId == "" || m.AttachmentId == "" {
		return nil, invalidArgument("session_id and attachment_id are required")
	}
	return write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: reqID, Body: &fsmpb.Command_TakeLease{TakeLease: &fsmpb.TakeLease{
				SessionId: m.SessionId, AttachmentId: m.AttachmentId, Steal: m.Steal, TtlNanos: int64(h.s.cfg.LeaseTTL),
			}}}
		},
		func(res *fsmpb.Result) *fakv1.TakeLeaseResponse {
			return &fakv1.TakeLeaseResponse{Lease: leaseToAPI(res.GetSession().GetLease()), AlreadyHeld: res.GetNoOp(), TtlMs: h.s.cfg.LeaseTTL.Milliseconds()}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.TakeLeaseRequest]) (*connect.Response[fakv1.TakeLeaseResponse], error) {
			return p.session.TakeLease(ctx, r)
		})
}

func (h *sessionHandler) RenewLease(ctx context.Context, req *connect.Request[fakv1.RenewLeaseRequest]) (*connect.Response[fakv1.RenewLeaseResponse], error) {
	m := req.Msg
	reqID := NewID("req_") // fixed before any retry, so a retried write is deduplicated
	if m.SessionId == "" || m.AttachmentId == "" {
		return nil, invalidArgument("session_id and attachment_id are required")
	}
	return write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: reqID, Body: &fsmpb.Command_RenewLease{RenewLease: &fsmpb.RenewLease{
				SessionId: m.SessionId, AttachmentId: m.AttachmentId, TtlNanos: int64(h.s.cfg.LeaseTTL),
			}}}
		},
		func(res *fsmpb.Result) *fakv1.RenewLeaseResponse {
			return &fakv1.RenewLeaseResponse{Lease: leaseToAPI(res.GetSession().GetLease())}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.RenewLeaseRequest]) (*connect.Response[fakv1.RenewLeaseResponse], error) {
			return p.session.RenewLease(ctx, r)
		})
}

func (h *sessionHandler) ReleaseLease(ctx context.Context, req *connect.Request[fakv1.ReleaseLeaseRequest]) (*connect.Response[fakv1.ReleaseLeaseResponse], error) {
	m := req.Msg
	reqID := NewID("req_") // fixed before any retry, so a retried write is deduplicated
	if m.SessionId == "" || m.AttachmentId == "" {
		return nil, invalidArgument("session_id and attachment_id are required")
	}
	return write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: reqID, Body: &fsmpb.Command_ReleaseLease{ReleaseLease: &fsmpb.ReleaseLease{
				SessionId: m.SessionId, AttachmentId: m.AttachmentId,
			}}}
		},
		func(res *fsmpb.Result) *fakv1.ReleaseLeaseResponse {
			return &fakv1.ReleaseLeaseResponse{NoOp: res.GetNoOp()}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.ReleaseLeaseRequest]) (*connect.Response[fakv1.ReleaseLeaseResponse], error) {
			return p.session.ReleaseLease(ctx, r)
		})
}

func (h *sessionHandler) AnswerApproval(ctx context.Context, req *connect.Request[fakv1.AnswerApprovalRequest]) (*connect.Response[fakv1.AnswerApprovalResponse], error) {
	m := req.Msg
	reqID := NewID("req_") // fixed before any retry, so a retried write is deduplicated
	if m.SessionId == "" || m.AttachmentId == "" || m.ApprovalSeq == 0 {
		return nil, invalidArgument("session_id, attachment_id and approval_seq are required")
	}
	return write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: reqID, Body: &fsmpb.Command_AnswerApproval{AnswerApproval: &fsmpb.AnswerApproval{
				SessionId: m.SessionId, AttachmentId: m.AttachmentId, ApprovalSeq: m.ApprovalSeq,
				Approved: m.Approved, Note: m.Note,
			}}}
		},
		func(res *fsmpb.Result) *fakv1.AnswerApprovalResponse {
			return &fakv1.AnswerApprovalResponse{AlreadyAnswered: res.GetNoOp()}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.AnswerApprovalRequest]) (*connect.Response[fakv1.AnswerApprovalResponse], error) {
			return p.session.AnswerApproval(ctx, r)
		})
}
