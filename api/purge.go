package api

import (
	"context"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// PurgeSession purges one stopped session (fsm/purge.go decides); the
// audit entry names the caller's role.
func (h *sessionHandler) PurgeSession(ctx context.Context, req *connect.Request[fakv1.PurgeSessionRequest]) (*connect.Response[fakv1.PurgeSessionResponse], error) {
	m := req.Msg
	if err := h.s.stampRequestID(&m.RequestId); err != nil {
		return nil, err
	}
	if m.SessionId == "" {
		return nil, invalidArgument("session_id is required")
	}
	by := apiclient.RoleName(callerRole(ctx)) + " token"
	return write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: m.RequestId, Body: &fsmpb.Command_PurgeSessions{PurgeSessions: &fsmpb.PurgeSessions{
				SessionIds: []string{m.SessionId}, Cause: fsm.PurgeCauseOperator, By: by,
			}}}
		},
		func(res *fsmpb.Result) *fakv1.PurgeSessionResponse {
			resp := &fakv1.PurgeSessionResponse{}
			if es := res.GetPurge().GetEntries(); len(es) == 1 {
				resp.Entry = AuditEntryToAPI(es[0])
			}
			return resp
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.PurgeSessionRequest]) (*connect.Response[fakv1.PurgeSessionResponse], error) {
			return p.session.PurgeSession(ctx, r)
		})
}

// AuditLog pages through the audit log, after a read barrier unless the
// caller asks for a stale read.
func (h *clusterHandler) AuditLog(ctx context.Context, req *connect.Request[fakv1.AuditLogRequest]) (*connect.Response[fakv1.AuditLogResponse], error) {
	if err := h.s.readBarrier(ctx, req.Header(), req.Msg.Consistency); err != nil {
		return nil, toConnectError(err)
	}
	limit := int(req.Msg.Limit)
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	es, err := h.s.fsm.Audit(max(req.Msg.FromSeq, 1), limit+1)
	if err != nil {
		return nil, toConnectError(err)
	}
	resp := &fakv1.AuditLogResponse{}
	if len(es) > limit {
		resp.NextSeq = es[limit].Seq
		es = es[:limit]
	}
	for _, e := range es {
		resp.Entries = append(resp.Entries, AuditEntryToAPI(e))
	}
	return connect.NewResponse(resp), nil
}
