package api

import (
	"context"
	"slices"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// runnerHandler serves RunnerService: the epoch-fenced writes of runners.
type runnerHandler struct {
	fakv1connect.UnimplementedRunnerServiceHandler
	s *Server
}

func (h *runnerHandler) AppendRunnerEvents(ctx context.Context, req *connect.Request[fakv1.AppendRunnerEventsRequest]) (*connect.Response[fakv1.AppendRunnerEventsResponse], error) {
	m := req.Msg
	if err := h.s.stampRequestID(&m.RequestId); err != nil {
		return nil, err
	}
	if m.SessionId == "" || m.Epoch == 0 || len(m.Events) == 0 {
		return nil, invalidArgument("session_id, epoch and events are required")
	}
	for i, ev := range m.Events {
		if !fsm.RunnerKind(ev.Kind) {
			return nil, invalidArgument("event %d: kind %q is not a runner kind", i, ev.Kind)
		}
		if n := len(ev.Text) + len(ev.Data); n > h.s.cfg.MaxEventBytes {
			return nil, invalidArgument("event %d is %d bytes; the limit is %d", i, n, h.s.cfg.MaxEventBytes)
		}
	}
	return write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command {
			ra := &fsmpb.RunnerAppend{SessionId: m.SessionId, Epoch: m.Epoch, Events: eventInputsFromAPI(m.Events), ChargeTurn: m.ChargeTurn, StartsInput: m.StartsInput, TurnOnly: m.TurnOnly}
			if m.Usage != nil {
				ra.Usage = budgetFromAPI(m.Usage)
			}
			if m.BindingProvider != "" || m.BindingThreadId != "" {
				ra.Binding = &fsmpb.ProviderBinding{Provider: m.BindingProvider, ThreadId: m.BindingThreadId}
			}
			return &fsmpb.Command{RequestId: m.RequestId, Body: &fsmpb.Command_RunnerAppend{RunnerAppend: ra}}
		},
		func(res *fsmpb.Result) *fakv1.AppendRunnerEventsResponse {
			a := res.GetAppend()
			return &fakv1.AppendRunnerEventsResponse{FirstSeq: a.GetFirstSeq(), LastSeq: a.GetLastSeq(),
				TurnRefused: a.GetTurnRefused(), UsageRefused: a.GetUsageRefused()}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.AppendRunnerEventsRequest]) (*connect.Response[fakv1.AppendRunnerEventsResponse], error) {
			return p.runner.AppendRunnerEvents(ctx, r)
		})
}

// requireAttachment fails with ATTACHMENT_NOT_FOUND unless the attachment is
// registered on the session in the local replica.
func (s *Server) requireAttachment(sessionID, attachmentID string) error {
	ats, err := s.fsm.Attachments(sessionID)
	if err != nil {
		return toConnectError(err)
	}
	if !slices.ContainsFunc(ats, func(a *fsmpb.Attachment) bool { return a.AttachmentId == attachmentID }) {
		return toConnectError(&fsm.Error{Reason: fsm.ReasonAttachmentNotFound, Message: "attachment " + attachmentID + " is not attached to session " + sessionID})
	}
	return nil
}
