package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	"github.com/fak-dev/fak/api/gateway"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// GatewayConfig is what a node's gateway forwards to and charges by.
type GatewayConfig struct {
	Accounts []gateway.Account
	Prices   gateway.PriceTable
	// RuntimeKey is the credential this node's own runtimes (the provider
	// CLIs it runs) call the gateway with: they get no API token.
	RuntimeKey string
}

// chargeTimeout bounds how long the gateway keeps retrying one charge
// (a leader election, a partition) before it gives up and logs it.
const chargeTimeout = 2 * time.Minute

// newGateway builds the node's metering gateway on this server.
func (s *Server) newGateway(auth *authInterceptor) *gateway.Handler {
	cfg := s.cfg.Gateway
	if cfg == nil {
		cfg = &GatewayConfig{}
	}
	o := gateway.Options{
		Accounts: cfg.Accounts, Prices: cfg.Prices, Meter: gatewayMeter{s},
		Logger:       s.logger.Named("gateway"),
		NewRequestID: func() string { return NewID("gw_") },
		Observe:      s.metrics.gatewayCall,
	}
	if auth.enabled() {
		o.Authorize = func(token string) error {
			if cfg.RuntimeKey != "" && subtle.ConstantTimeCompare([]byte(token), []byte(cfg.RuntimeKey)) == 1 {
				return nil
			}
			h := http.Header{}
			h.Set("Authorization", "Bearer "+token)
			err := auth.require(RoleAgent, h)
			if connect.CodeOf(err) == connect.CodePermissionDenied {
				// A token fak knows whose role may not call models (a
				// read token): 403, in the provider's shape.
				return gateway.Refusef(http.StatusForbidden, "PERMISSION_DENIED", "%v", err)
			}
			return err
		}
	}
	return gateway.New(o)
}

// gatewayMeter is the gateway's Meter: admission reads the leader's state
// (the local one on the leader, after a read barrier on a follower) by the
// FSM's rule (fsm.MayStart); a refusal and every charge are FSM commands,
// proposed through the leader like RecordUsage.
type gatewayMeter struct{ s *Server }

func (m gatewayMeter) Admit(ctx context.Context, c gateway.Call) (gateway.Admission, error) {
	// Admission sees every charge acknowledged before the call (issue 32):
	// the leader has applied each charge it acknowledged; a follower
	// whose replica admits a call on a limited envelope reads again after
	// a linearizable barrier (one round trip to the leader). An envelope
	// without limits (they are fixed when it is made) refuses no call, so
	// it needs none; a refusal by budget is the leader's already. With the
	// gateway ending an answer only once its charge is committed
	// (gateway.SettleWait), a call a client sends after the previous one
	// ended, through any node, finds that call's usage.
	adm, limited, err := m.admit(ctx, c)
	var ref *gateway.Refusal
	notFound := errors.As(err, &ref) && ref.Reason == string(fsm.ReasonNotFound)
	stale := !m.s.cluster.IsLeader() && err == nil && limited && !adm.Prepaid
	if !notFound && !stale {
		return adm, err
	}
	// Catch up, ask again: maybe this replica did not know the session yet
	// (created a moment ago through another node), or a charge.
	if berr := m.s.readBarrier(ctx, m.nodeHeader(), fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE); berr != nil {
		if notFound {
			return adm, err
		}
		return gateway.Admission{}, gateway.Refusef(http.StatusServiceUnavailable, "UNAVAILABLE",
			"checking the budget: no read of the committed state: %v", berr)
	}
	adm, _, err = m.admit(ctx, c)
	return adm, err
}

// admit decides on the local replica; limited: the envelope has a limit
// (or the session a context cap) that could refuse a call.
func (m gatewayMeter) admit(ctx context.Context, c gateway.Call) (_ gateway.Admission, limited bool, _ error) {
	f := m.s.fsm
	adm := gateway.Admission{SessionID: c.TraceID}
	id := c.TraceID
	switch {
	case c.TraceID != "":
	case c.LaunchID != "":
		l, err := f.Launch(c.LaunchID)
		if err != nil {
			return adm, limited, gateway.Refusef(http.StatusNotFound, string(fsm.ReasonNotFound), "launch %s is not known to this fleet", c.LaunchID)
		}
		// The charge names the launch: the FSM resolves its default
		// session when it applies, so a clear just before charges the
		// child.
		adm.LaunchID, id = c.LaunchID, l.DefaultSession
	default:
		return adm, limited, gateway.Refusef(http.StatusBadRequest, string(fsm.ReasonInvalidArgument),
			"no session to charge: send %s: <session id>, or call through a launch (%s or /gateway/launch/<id>/…)", gateway.HeaderTraceID, gateway.HeaderLaunch)
	}
	s, err := f.Session(id)
	if err != nil {
		return adm, limited, gateway.Refusef(http.StatusNotFound, string(fsm.ReasonNotFound), "session %s is not known to this fleet", id)
	}
	if s.State == fsmpb.SessionState_SESSION_STATE_STOPPED {
		return adm, limited, gateway.Refusef(http.StatusBadRequest, string(fsm.ReasonSessionStopped), "session %s is stopped (%s)", id, s.StopReason)
	}
	env, err := f.Envelope(s.EnvelopeId)
	if err != nil {
		return adm, limited, gateway.Refusef(http.StatusNotFound, string(fsm.ReasonNotFound), "session %s has no budget envelope", id)
	}
	limited = fsm.Limited(env, s)
	axis := fsm.MayStart(env, s)
	if axis == "" {
		return adm, limited, nil
	}
	// The replica says used up. The cluster decides: the call's query,
	// charged now, is refused by the FSM, which journals the refusal; if
	// this replica was behind (a context axis re-armed by a reset it has
	// not applied), it is charged and the call goes on, its query paid.
	_, err = m.record(ctx, adm, &fakv1.Budget{Queries: 1}, NewID("gw_"), false, "")
	switch {
	case err == nil:
		adm.Prepaid = true
		return adm, limited, nil
	case apiclient.ErrorInfo(err).GetReason() == string(fsm.ReasonBudgetExhausted):
		return adm, limited, &gateway.Refusal{Status: http.StatusTooManyRequests, Reason: string(fsm.ReasonBudgetExhausted), Axis: axis,
			Message: "the " + axis + " budget of session " + id + " is exhausted"}
	}
	return adm, limited, gateway.Refusef(http.StatusServiceUnavailable, "UNAVAILABLE", "checking the budget of session %s: %v", id, err)
}

// Charge records a finished call's usage, incurred, retrying under one
// request id (the FSM counts it once) until it lands or chargeTimeout, or
// an error no retry mends (a refused credential); then the charge is held
// and journaled as unmetered at the next chance (gateway_unmetered.go).
func (m gatewayMeter) Charge(a gateway.Admission, usage *fsmpb.Budget, requestID string) {
	ctx, cancel := context.WithTimeout(context.Background(), chargeTimeout)
	defer cancel()
	if requestID == "" {
		requestID = NewID("gw_")
	}
	backoff := 50 * time.Millisecond
	for {
		_, err := m.record(ctx, a, BudgetToAPI(usage), requestID, true, "")
		if err == nil {
			// The leader takes charges: the next chance for any held back.
			if m.s.unmeteredQ.len() > 0 {
				m.s.unmeteredQ.poke()
			}
			return
		}
		if !retryable(err) || ctx.Err() != nil {
			// Never dropped: journaled as unmetered at the next chance.
			m.s.unmetered(unmeteredCharge{adm: a, usage: usage, requestID: requestID, reason: reasonOf(err)})
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
			backoff = min(2*backoff, time.Second)
		}
	}
}

// record proposes a RecordUsage through the leader, with this node's own
// credential (the caller was authorized by the gateway).
func (m gatewayMeter) record(ctx context.Context, a gateway.Admission, usage *fakv1.Budget, requestID string, incurred bool, unmetered string) (*fakv1.RecordUsageResponse, error) {
	req := connect.NewRequest(&fakv1.RecordUsageRequest{SessionId: a.SessionID, LaunchId: a.LaunchID, Usage: usage,
		RequestId: requestID, Incurred: incurred, Unmetered: unmetered})
	for k, v := range m.nodeHeader() {
		req.Header()[k] = v
	}
	resp, err := (&lifecycleHandler{s: m.s}).RecordUsage(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// nodeHeader carries this node's own credential, for what the gateway asks
// of the leader on a caller's behalf (the caller was authorized here).
func (m gatewayMeter) nodeHeader() http.Header {
	h := http.Header{}
	if secret := m.s.OwnSecret(); secret != "" {
		h.Set("Authorization", "Bearer "+secret)
	}
	return h
}
