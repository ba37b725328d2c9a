package api

import (
	"context"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

const (
	defaultPageSize = 100
	maxPageSize     = 1000
	// watchHeartbeat: an idle WatchEvents stream sends an empty message this
	// often so clients and proxies notice a dead connection.
	watchHeartbeat = 15 * time.Second
)

type sessionHandler struct {
	fakv1connect.UnimplementedSessionServiceHandler
	s *Server
}

func (h *sessionHandler) CreateSession(ctx context.Context, req *connect.Request[fakv1.CreateSessionRequest]) (*connect.Response[fakv1.CreateSessionResponse], error) {
	m := req.Msg
	if err := h.s.stampRequestID(&m.RequestId); err != nil {
		return nil, err
	}
	if len(m.Title) > fsm.MaxTitleBytes || len(m.Objective) > fsm.MaxObjectiveBytes {
		return nil, invalidArgument("title (max %d bytes) or objective (max %d bytes) too long", fsm.MaxTitleBytes, fsm.MaxObjectiveBytes)
	}
	// The first epoch runs on the node that received the request unless the
	// caller placed it (or it is external: no node runs it); set before
	// forwarding, so the leader keeps it.
	if m.Placement == nil {
		m.Placement = &fakv1.Placement{}
	}
	if m.Placement.RuntimeAdapter == "" {
		m.Placement.RuntimeAdapter = fsm.DefaultRuntimeAdapter
	}
	if m.Placement.Node == "" && m.Placement.RuntimeAdapter != fsm.ExternalRuntime {
		m.Placement.Node = h.s.defaultNode(m.Placement.RuntimeAdapter)
	}
	return write(ctx, h.s, req, "",
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: m.RequestId, Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{
				SessionId: NewID("ses_"), Title: m.Title, Objective: m.Objective,
				Placement: placementFromAPI(m.Placement),
				Policy:    policyFromAPI(m.Policy, h.s.cfg.DefaultPolicy),
			}}}
		},
		func(res *fsmpb.Result) *fakv1.CreateSessionResponse {
			return &fakv1.CreateSessionResponse{Session: sessionToAPI(res.GetSession())}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.CreateSessionRequest]) (*connect.Response[fakv1.CreateSessionResponse], error) {
			return p.session.CreateSession(ctx, r)
		})
}

func (h *sessionHandler) AppendEvents(ctx context.Context, req *connect.Request[fakv1.AppendEventsRequest]) (*connect.Response[fakv1.AppendEventsResponse], error) {
	m := req.Msg
	if err := h.s.stampRequestID(&m.RequestId); err != nil {
		return nil, err
	}
	if m.SessionId == "" {
		return nil, invalidArgument("session_id is required")
	}
	for i, ev := range m.Events {
		if n := len(ev.Text) + len(ev.Data); n > h.s.cfg.MaxEventBytes {
			return nil, invalidArgument("event %d is %d bytes; the limit is %d", i, n, h.s.cfg.MaxEventBytes)
		}
	}
	inputs := eventInputsFromAPI(m.Events)
	if err := fsm.ValidateEventInputs(inputs); err != nil {
		return nil, toConnectError(err)
	}
	return write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: m.RequestId, Body: &fsmpb.Command_AppendEvents{AppendEvents: &fsmpb.AppendEvents{
				SessionId: m.SessionId, ExpectedSeq: m.ExpectedSeq, Events: inputs,
			}}}
		},
		func(res *fsmpb.Result) *fakv1.AppendEventsResponse {
			a := res.GetAppend()
			return &fakv1.AppendEventsResponse{SessionId: a.SessionId, FirstSeq: a.FirstSeq, LastSeq: a.LastSeq}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.AppendEventsRequest]) (*connect.Response[fakv1.AppendEventsResponse], error) {
			return p.session.AppendEvents(ctx, r)
		})
}

func (h *sessionHandler) StopSession(ctx context.Context, req *connect.Request[fakv1.StopSessionRequest]) (*connect.Response[fakv1.StopSessionResponse], error) {
	m := req.Msg
	if err := h.s.stampRequestID(&m.RequestId); err != nil {
		return nil, err
	}
	if m.SessionId == "" {
		return nil, invalidArgument("session_id is required")
	}
	if len(m.Reason) > fsm.MaxReasonBytes {
		return nil, invalidArgument("reason longer than %d bytes", fsm.MaxReasonBytes)
	}
	return write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: m.RequestId, Body: &fsmpb.Command_StopSession{StopSession: &fsmpb.StopSession{
				SessionId: m.SessionId, Reason: m.Reason,
			}}}
		},
		func(res *fsmpb.Result) *fakv1.StopSessionResponse {
			return &fakv1.StopSessionResponse{Session: sessionToAPI(res.GetSession())}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.StopSessionRequest]) (*connect.Response[fakv1.StopSessionResponse], error) {
			return p.session.StopSession(ctx, r)
		})
}

func (h *sessionHandler) ListSessions(ctx context.Context, req *connect.Request[fakv1.ListSessionsRequest]) (*connect.Response[fakv1.ListSessionsResponse], error) {
	if err := h.s.readBarrier(ctx, req.Header(), req.Msg.Consistency); err != nil {
		return nil, toConnectError(err)
	}
	size := pageSize(req.Msg.PageSize)
	sessions, more, err := h.s.fsm.Sessions(req.Msg.PageToken, size)
	if err != nil {
		return nil, toConnectError(err)
	}
	resp := &fakv1.ListSessionsResponse{}
	for _, s := range sessions {
		resp.Sessions = append(resp.Sessions, sessionToAPI(s))
	}
	if more && len(sessions) > 0 {
		resp.NextPageToken = sessions[len(sessions)-1].SessionId
	}
	return connect.NewResponse(resp), nil
}

func (h *sessionHandler) ReadEvents(ctx context.Context, req *connect.Request[fakv1.ReadEventsRequest]) (*connect.Response[fakv1.ReadEventsResponse], error) {
	m := req.Msg
	if m.SessionId == "" {
		return nil, invalidArgument("session_id is required")
	}
	if err := h.s.readBarrier(ctx, req.Header(), m.Consistency); err != nil {
		return nil, toConnectError(err)
	}
	events, head, err := h.s.fsm.Events(m.SessionId, m.FromSeq, pageSize(m.Limit))
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&fakv1.ReadEventsResponse{Events: eventsToAPI(events), HeadSeq: head}), nil
}

// WatchEvents replays the journal after the cursor from the local replica,
// then follows it live. The first read is linearizable, so a session created
// a moment ago on another node is found; afterwards the local FSM's change
// notifications drive the stream. Every client sees the same order because
// the journal is the order.
func (h *sessionHandler) WatchEvents(ctx context.Context, req *connect.Request[fakv1.WatchEventsRequest], stream *connect.ServerStream[fakv1.WatchEventsResponse]) error {
	m := req.Msg
	if m.SessionId == "" {
		return invalidArgument("session_id is required")
	}
	if err := h.s.readBarrier(ctx, req.Header(), fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE); err != nil {
		return toConnectError(err)
	}
	if m.AttachmentId != "" {
		if err := h.s.requireAttachment(m.SessionId, m.AttachmentId); err != nil {
			return err
		}
	}
	after := m.AfterSeq
	heartbeat := time.NewTicker(watchHeartbeat)
	defer heartbeat.Stop()
	// Answer at once, even when there is nothing to replay: clients learn
	// the stream is open (its headers flush with the first message) instead
	// of waiting up to a heartbeat on a quiet session.
	opened := false
	for {
		changed := h.s.fsm.Changed()
		events, _, err := h.s.fsm.Events(m.SessionId, after+1, maxPageSize)
		if err != nil {
			return toConnectError(err)
		}
		if len(events) > 0 || !opened {
			opened = true
			if err := stream.Send(&fakv1.WatchEventsResponse{Events: eventsToAPI(events)}); err != nil {
				return err
			}
			heartbeat.Reset(watchHeartbeat)
			if len(events) > 0 {
				after = events[len(events)-1].Seq
				continue
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-h.s.shutdownCh:
			return toConnectError(errShuttingDown)
		case <-heartbeat.C:
			if err := stream.Send(&fakv1.WatchEventsResponse{}); err != nil {
				return err
			}
		case <-changed:
		}
	}
}

func pageSize(n uint32) int {
	switch {
	case n == 0:
		return defaultPageSize
	case n > maxPageSize:
		return maxPageSize
	}
	return int(n)
}
