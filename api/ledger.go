package api

import (
	"context"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The reset ledger on SessionService. New ids (provider-facing ids, fork
// ids) are drawn here, before forwarding, so a retried request carries the
// same ones and the FSM's request-id deduplication makes it a no-op.

func boundaryToAPI(b *fsmpb.Boundary) *fakv1.Boundary {
	if b == nil {
		return nil
	}
	return &fakv1.Boundary{Action: b.Action, Session: sessionToAPI(b.Session), PreviousSessionId: b.PreviousSession, Pruned: b.Pruned}
}

// ledgerWrite runs one ledger command for SessionService and the
// lifecycle service alike.
func ledgerWrite[Req, Resp any](ctx context.Context, s *Server, req *connect.Request[Req], sessionID string,
	cmd *fsmpb.Command, wrap func(*fakv1.Boundary) *Resp,
	forward func(context.Context, *peerClients, *connect.Request[Req]) (*connect.Response[Resp], error),
) (*connect.Response[Resp], error) {
	return write(ctx, s, req, sessionID,
		func() *fsmpb.Command { return cmd },
		func(res *fsmpb.Result) *Resp { return wrap(boundaryToAPI(res.GetBoundary())) },
		forward)
}

func (h *sessionHandler) FreshSession(ctx context.Context, req *connect.Request[fakv1.FreshSessionRequest]) (*connect.Response[fakv1.FreshSessionResponse], error) {
	m := req.Msg
	return sessionLedger(ctx, h.s, req, &m.RequestId, m.SessionId, func(reqID string) *fsmpb.Command {
		return &fsmpb.Command{RequestId: reqID, Body: &fsmpb.Command_FreshSession{FreshSession: &fsmpb.FreshSession{
			SessionId: m.SessionId, ProviderSessionId: providerIDFor(reqID)}}}
	},
		func(b *fakv1.Boundary) *fakv1.FreshSessionResponse { return &fakv1.FreshSessionResponse{Boundary: b} },
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.FreshSessionRequest]) (*connect.Response[fakv1.FreshSessionResponse], error) {
			return p.session.FreshSession(ctx, r)
		})
}

func (h *sessionHandler) ResetSession(ctx context.Context, req *connect.Request[fakv1.ResetSessionRequest]) (*connect.Response[fakv1.ResetSessionResponse], error) {
	m := req.Msg
	return sessionLedger(ctx, h.s, req, &m.RequestId, m.SessionId, func(reqID string) *fsmpb.Command {
		return &fsmpb.Command{RequestId: reqID, Body: &fsmpb.Command_ResetSession{ResetSession: &fsmpb.ResetSession{
			SessionId: m.SessionId, ProviderSessionId: providerIDFor(reqID)}}}
	},
		func(b *fakv1.Boundary) *fakv1.ResetSessionResponse { return &fakv1.ResetSessionResponse{Boundary: b} },
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.ResetSessionRequest]) (*connect.Response[fakv1.ResetSessionResponse], error) {
			return p.session.ResetSession(ctx, r)
		})
}

func (h *sessionHandler) ClearSession(ctx context.Context, req *connect.Request[fakv1.ClearSessionRequest]) (*connect.Response[fakv1.ClearSessionResponse], error) {
	m := req.Msg
	return sessionLedger(ctx, h.s, req, &m.RequestId, m.SessionId, func(reqID string) *fsmpb.Command {
		return &fsmpb.Command{RequestId: reqID, Body: &fsmpb.Command_ClearSession{ClearSession: &fsmpb.ClearSession{
			SessionId: m.SessionId, Source: "clear", Reason: fsm.StopUserClear, ProviderSessionId: providerIDFor(reqID)}}}
	},
		func(b *fakv1.Boundary) *fakv1.ClearSessionResponse { return &fakv1.ClearSessionResponse{Boundary: b} },
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.ClearSessionRequest]) (*connect.Response[fakv1.ClearSessionResponse], error) {
			return p.session.ClearSession(ctx, r)
		})
}

func (h *sessionHandler) NewSession(ctx context.Context, req *connect.Request[fakv1.NewSessionRequest]) (*connect.Response[fakv1.NewSessionResponse], error) {
	m := req.Msg
	return sessionLedger(ctx, h.s, req, &m.RequestId, m.SessionId, func(reqID string) *fsmpb.Command {
		return &fsmpb.Command{RequestId: reqID, Body: &fsmpb.Command_ClearSession{ClearSession: &fsmpb.ClearSession{
			SessionId: m.SessionId, Source: "new", Reason: fsm.StopUserNew, ProviderSessionId: providerIDFor(reqID)}}}
	},
		func(b *fakv1.Boundary) *fakv1.NewSessionResponse { return &fakv1.NewSessionResponse{Boundary: b} },
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.NewSessionRequest]) (*connect.Response[fakv1.NewSessionResponse], error) {
			return p.session.NewSession(ctx, r)
		})
}

func (h *sessionHandler) ForkSession(ctx context.Context, req *connect.Request[fakv1.ForkSessionRequest]) (*connect.Response[fakv1.ForkSessionResponse], error) {
	m := req.Msg
	return sessionLedger(ctx, h.s, req, &m.RequestId, m.SessionId, func(reqID string) *fsmpb.Command {
		return &fsmpb.Command{RequestId: reqID, Body: &fsmpb.Command_ForkSession{ForkSession: &fsmpb.ForkSession{
			SourceSessionId: m.SessionId, AtSeq: m.AtSeq,
			ForkSessionId:     fsm.ChildSessionID(m.SessionId, reqID),
			ProviderSessionId: providerIDFor(reqID)}}}
	},
		func(b *fakv1.Boundary) *fakv1.ForkSessionResponse { return &fakv1.ForkSessionResponse{Boundary: b} },
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.ForkSessionRequest]) (*connect.Response[fakv1.ForkSessionResponse], error) {
			return p.session.ForkSession(ctx, r)
		})
}

// sessionLedger runs one SessionService ledger operation: the request id
// is stamped (and forwarded) before the command is built from it, so the
// ids the command derives from it stay the same under retries.
func sessionLedger[Req, Resp any](ctx context.Context, s *Server, req *connect.Request[Req], requestID *string, sessionID string,
	build func(requestID string) *fsmpb.Command, wrap func(*fakv1.Boundary) *Resp,
	forward func(context.Context, *peerClients, *connect.Request[Req]) (*connect.Response[Resp], error),
) (*connect.Response[Resp], error) {
	if err := s.stampRequestID(requestID); err != nil {
		return nil, err
	}
	if sessionID == "" {
		return nil, invalidArgument("session_id is required")
	}
	return ledgerWrite(ctx, s, req, sessionID, build(*requestID), wrap, forward)
}

// providerIDFor derives the provider-facing id a user-initiated ledger
// operation rotates to from its request id: stable under retries.
func providerIDFor(requestID string) string { return "fak_" + requestID }

// GetLineage walks up to the root of a session's lineage and returns the
// whole tree below it.
func (h *sessionHandler) GetLineage(ctx context.Context, req *connect.Request[fakv1.GetLineageRequest]) (*connect.Response[fakv1.GetLineageResponse], error) {
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
	const maxNodes = 1000
	for seen := 0; s.ParentSession != "" && seen < maxNodes; seen++ {
		p, err := h.s.fsm.Session(s.ParentSession)
		if err != nil {
			break
		}
		s = p
	}
	resp := &fakv1.GetLineageResponse{Root: s.SessionId}
	queue := []*fsmpb.Session{s}
	for len(queue) > 0 && len(resp.Nodes) < maxNodes {
		cur := queue[0]
		queue = queue[1:]
		node := &fakv1.LineageNode{Session: sessionToAPI(cur), ParentSession: cur.ParentSession,
			Source: cur.BoundarySource, ForkAddress: cur.ForkAddress}
		edges, err := h.s.fsm.Children(cur.SessionId)
		if err != nil {
			return nil, toConnectError(err)
		}
		for _, e := range edges {
			node.Children = append(node.Children, e.Child)
			if c, err := h.s.fsm.Session(e.Child); err == nil {
				queue = append(queue, c)
			}
		}
		resp.Nodes = append(resp.Nodes, node)
	}
	return connect.NewResponse(resp), nil
}

// BudgetToAPI is the API form of an FSM budget (nil: a zero budget).
func BudgetToAPI(x *fsmpb.Budget) *fakv1.Budget {
	return &fakv1.Budget{Turns: x.GetTurns(), OutputTokens: x.GetOutputTokens(), Queries: x.GetQueries(),
		SpendMicros: x.GetSpendMicros(), ToolCalls: x.GetToolCalls(), InputTokens: x.GetInputTokens()}
}

// envelopeToAPI adds what a client needs to act on: remaining per axis and
// elapsed wall clock (by this node's clock: a view, not a decision).
func envelopeToAPI(e *fsmpb.Envelope) *fakv1.Envelope {
	if e == nil {
		return nil
	}
	b := BudgetToAPI
	rem := func(limit, used uint64) uint64 {
		if limit == 0 || used >= limit {
			return 0
		}
		return limit - used
	}
	l, u := e.GetLimits(), e.GetUsed()
	return &fakv1.Envelope{
		EnvelopeId: e.EnvelopeId, Limits: b(l), Used: b(u),
		Remaining: &fakv1.Budget{Turns: rem(l.GetTurns(), u.GetTurns()), OutputTokens: rem(l.GetOutputTokens(), u.GetOutputTokens()),
			Queries: rem(l.GetQueries(), u.GetQueries()), SpendMicros: rem(l.GetSpendMicros(), u.GetSpendMicros()),
			ToolCalls: rem(l.GetToolCalls(), u.GetToolCalls()), InputTokens: rem(l.GetInputTokens(), u.GetInputTokens())},
		CreatedUnixNano: e.CreatedUnixNano, ElapsedMs: time.Since(time.Unix(0, e.CreatedUnixNano)).Milliseconds(),
		Priority: e.Priority, Pace: e.Pace, QaEnvelope: e.QaEnvelope, Sessions: e.Sessions, Refusals: e.Refusals,
	}
}

func policyFromAPI(p *fakv1.Policy, def *fakv1.Policy) *fsmpb.Policy {
	pick := func(v, d uint64) uint64 {
		if v != 0 {
			return v
		}
		return d
	}
	pickS := func(v, d string) string {
		if v != "" {
			return v
		}
		return d
	}
	l, dl := p.GetLimits(), def.GetLimits()
	return &fsmpb.Policy{
		Limits: &fsmpb.Budget{
			Turns: pick(l.GetTurns(), dl.GetTurns()), OutputTokens: pick(l.GetOutputTokens(), dl.GetOutputTokens()),
			Queries: pick(l.GetQueries(), dl.GetQueries()), SpendMicros: pick(l.GetSpendMicros(), dl.GetSpendMicros()),
			ToolCalls: pick(l.GetToolCalls(), dl.GetToolCalls()), InputTokens: pick(l.GetInputTokens(), dl.GetInputTokens()),
		},
		ContextCap: pick(p.GetContextCap(), def.GetContextCap()),
		Priority:   pickS(p.GetPriority(), def.GetPriority()), Pace: pickS(p.GetPace(), def.GetPace()),
		QaEnvelope: pickS(p.GetQaEnvelope(), def.GetQaEnvelope()),
		Recover:    pickS(p.GetRecover(), def.GetRecover()),
	}
}
