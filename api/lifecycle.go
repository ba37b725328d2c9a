package api

import (
	"context"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// HeaderTraceID names the session a gateway charges; without it, usage goes
// to the launch's default session.
const HeaderTraceID = "X-Trace-Id"

// lifecycleHandler serves LifecycleService for `fak guard` and gateways.
type lifecycleHandler struct {
	fakv1connect.UnimplementedLifecycleServiceHandler
	s *Server
}

func (h *lifecycleHandler) BindLaunch(ctx context.Context, req *connect.Request[fakv1.BindLaunchRequest]) (resp *connect.Response[fakv1.BindLaunchResponse], err error) {
	// A bind is a duplicate when the launch already has this default
	// session (as this replica sees it): its derived request id makes the
	// FSM return the first bind's result, so the result cannot tell.
	var duplicate bool
	defer func() { h.s.observeHook(req.Header(), hookBindLaunch, duplicate, err) }()
	m := req.Msg
	if m.LaunchId == "" || len(m.LaunchId) > fsm.MaxSessionIDBytes {
		return nil, invalidArgument("launch_id must be 1-%d bytes", fsm.MaxSessionIDBytes)
	}
	if len(m.Host) > fsm.MaxPlacementFieldBytes {
		return nil, invalidArgument("host longer than %d bytes", fsm.MaxPlacementFieldBytes)
	}
	sessionID := m.SessionId
	if sessionID == "" {
		// A new launch session, created once per launch id: the request id
		// derives from it, so a retried bind does not create a second one.
		// Its agent is the launch's provider process: the external runtime.
		create := connect.NewRequest(&fakv1.CreateSessionRequest{
			Title: m.Title, Objective: m.Objective, RequestId: "req_launch_" + m.LaunchId,
			Placement: &fakv1.Placement{RuntimeAdapter: fsm.ExternalRuntime, Provider: m.Provider, LaunchId: m.LaunchId, Host: m.Host},
		})
		// The caller's credentials go along when a follower forwards the
		// create to the leader.
		create.Header().Set("Authorization", req.Header().Get("Authorization"))
		create.Header().Set(HeaderRequestID, req.Header().Get(HeaderRequestID))
		created, err := (&sessionHandler{s: h.s}).CreateSession(ctx, create)
		if err != nil {
			return nil, err
		}
		sessionID = created.Msg.Session.SessionId
		m.SessionId = sessionID
	}
	if l, lerr := h.s.fsm.Launch(m.LaunchId); lerr == nil && l.DefaultSession == sessionID {
		duplicate = true
	}
	cmd := &fsmpb.Command{RequestId: "req_bind_" + m.LaunchId + "_" + sessionID, Body: &fsmpb.Command_BindLaunch{BindLaunch: &fsmpb.BindLaunch{
		LaunchId: m.LaunchId, Provider: m.Provider, SessionId: sessionID, Host: m.Host}}}
	return write(ctx, h.s, req, sessionID,
		func() *fsmpb.Command { return cmd },
		func(res *fsmpb.Result) *fakv1.BindLaunchResponse {
			return &fakv1.BindLaunchResponse{Session: sessionToAPI(res.GetBoundary().GetSession())}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.BindLaunchRequest]) (*connect.Response[fakv1.BindLaunchResponse], error) {
			return p.lifecycle.BindLaunch(ctx, r)
		})
}

func (h *lifecycleHandler) ProviderSessionStart(ctx context.Context, req *connect.Request[fakv1.ProviderSessionStartRequest]) (resp *connect.Response[fakv1.ProviderSessionStartResponse], err error) {
	defer func() { h.s.observeHook(req.Header(), hookStart, resp != nil && redelivery(resp.Msg.Boundary), err) }()
	m := req.Msg
	if err := h.s.stampRequestID(&m.RequestId); err != nil {
		return nil, err
	}
	if m.LaunchId == "" || m.ProviderSessionId == "" || m.Source == "" {
		return nil, invalidArgument("launch_id, source and provider_session_id are required")
	}
	cmd := &fsmpb.Command{RequestId: m.RequestId, Body: &fsmpb.Command_ProviderSessionStart{ProviderSessionStart: &fsmpb.ProviderSessionStart{
		LaunchId: m.LaunchId, Provider: m.Provider, Source: m.Source, ProviderSessionId: m.ProviderSessionId, Metadata: m.MetadataJson}}}
	return ledgerWrite(ctx, h.s, req, "", cmd,
		func(b *fakv1.Boundary) *fakv1.ProviderSessionStartResponse {
			return &fakv1.ProviderSessionStartResponse{Boundary: b}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.ProviderSessionStartRequest]) (*connect.Response[fakv1.ProviderSessionStartResponse], error) {
			return p.lifecycle.ProviderSessionStart(ctx, r)
		})
}

func (h *lifecycleHandler) ProviderSessionEnd(ctx context.Context, req *connect.Request[fakv1.ProviderSessionEndRequest]) (resp *connect.Response[fakv1.ProviderSessionEndResponse], err error) {
	defer func() { h.s.observeHook(req.Header(), hookEnd, resp != nil && redelivery(resp.Msg.Boundary), err) }()
	m := req.Msg
	if err := h.s.stampRequestID(&m.RequestId); err != nil {
		return nil, err
	}
	if m.LaunchId == "" {
		return nil, invalidArgument("launch_id is required")
	}
	cmd := &fsmpb.Command{RequestId: m.RequestId, Body: &fsmpb.Command_ProviderSessionEnd{ProviderSessionEnd: &fsmpb.ProviderSessionEnd{
		LaunchId: m.LaunchId, Provider: m.Provider, Reason: m.Reason, ProviderSessionId: m.ProviderSessionId, Metadata: m.MetadataJson}}}
	return ledgerWrite(ctx, h.s, req, "", cmd,
		func(b *fakv1.Boundary) *fakv1.ProviderSessionEndResponse {
			return &fakv1.ProviderSessionEndResponse{Boundary: b}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.ProviderSessionEndRequest]) (*connect.Response[fakv1.ProviderSessionEndResponse], error) {
			return p.lifecycle.ProviderSessionEnd(ctx, r)
		})
}

func (h *lifecycleHandler) RecordUsage(ctx context.Context, req *connect.Request[fakv1.RecordUsageRequest]) (*connect.Response[fakv1.RecordUsageResponse], error) {
	m := req.Msg
	if err := h.s.stampRequestID(&m.RequestId); err != nil {
		return nil, err
	}
	if m.SessionId == "" {
		m.SessionId = req.Header().Get(HeaderTraceID)
	}
	if m.SessionId == "" && m.LaunchId == "" {
		return nil, invalidArgument("a trace id (session_id or %s) or a launch_id is required", HeaderTraceID)
	}
	cmd := &fsmpb.Command{RequestId: m.RequestId, Body: &fsmpb.Command_RecordUsage{RecordUsage: &fsmpb.RecordUsage{
		SessionId: m.SessionId, LaunchId: m.LaunchId, ContextTokens: m.ContextTokens,
		Usage: budgetFromAPI(m.GetUsage()), Incurred: m.Incurred, Unmetered: m.Unmetered,
	}}}
	return write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command { return cmd },
		func(res *fsmpb.Result) *fakv1.RecordUsageResponse {
			return h.usageAnswer(m, res)
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.RecordUsageRequest]) (*connect.Response[fakv1.RecordUsageResponse], error) {
			return p.lifecycle.RecordUsage(ctx, r)
		})
}

// usageAnswer is RecordUsage's answer, built on the leader right after the
// charge applied there, so it reports the state the charge produced (a
// follower's replica may not have applied it yet): the envelope from the
// FSM's result, the session charged and its context axis from the
// leader's replica.
func (h *lifecycleHandler) usageAnswer(m *fakv1.RecordUsageRequest, res *fsmpb.Result) *fakv1.RecordUsageResponse {
	out := &fakv1.RecordUsageResponse{Envelope: envelopeToAPI(res.GetEnvelope()), SessionId: m.SessionId}
	if out.SessionId == "" {
		if l, err := h.s.fsm.Launch(m.LaunchId); err == nil {
			out.SessionId = l.DefaultSession
		}
	}
	if s, err := h.s.fsm.Session(out.SessionId); err == nil {
		out.ContextUsed, out.ContextCap = s.ContextUsed, s.ContextCap
	}
	return out
}

func (h *lifecycleHandler) DescribeLaunch(ctx context.Context, req *connect.Request[fakv1.DescribeLaunchRequest]) (*connect.Response[fakv1.DescribeLaunchResponse], error) {
	if req.Msg.LaunchId == "" {
		return nil, invalidArgument("launch_id is required")
	}
	if err := h.s.readBarrier(ctx, req.Header(), fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE); err != nil {
		return nil, toConnectError(err)
	}
	l, err := h.s.fsm.Launch(req.Msg.LaunchId)
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&fakv1.DescribeLaunchResponse{LaunchId: l.LaunchId, Provider: l.Provider,
		DefaultSession: l.DefaultSession, ProviderSessionId: l.ProviderSessionId}), nil
}

// budgetFromAPI is the FSM's form of an API budget (nil: zero usage).
func budgetFromAPI(u *fakv1.Budget) *fsmpb.Budget {
	return &fsmpb.Budget{Turns: u.GetTurns(), OutputTokens: u.GetOutputTokens(), Queries: u.GetQueries(),
		SpendMicros: u.GetSpendMicros(), ToolCalls: u.GetToolCalls(), InputTokens: u.GetInputTokens()}
}
