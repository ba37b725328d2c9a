package api

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fak-dev/fak/api/apiclient"
	"github.com/fak-dev/fak/api/gateway"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// A model call the gateway passed and the upstream answered whose charge
// could not be committed when it ended (no leader for chargeTimeout, a
// credential the leader refuses) is never dropped (issue 32): the node
// keeps it and journals it late, as usage incurred with the reason it was
// unmetered (RecordUsage.unmetered, a budget.charged fact), at the next
// chance — a retry every unmeteredRetry, and at once after any charge of
// this gateway lands (the leader is reachable again). The same request id
// as the failed charge: had that one landed after all, the FSM answers
// the retry from its idempotency record and counts it once. The queue is
// the node's memory: a node that stops with charges in it logs each, with
// its usage, at error level.

// unmeteredRetry is how often the queue is tried while it holds charges.
const unmeteredRetry = time.Second

// maxUnmetered bounds the queue; past it a charge is logged and counted
// lost (reason "queue_full"), never silently.
const maxUnmetered = 100_000

type unmeteredCharge struct {
	adm              gateway.Admission
	usage            *fsmpb.Budget
	requestID        string
	reason           string
	failedUnixMillis int64
}

type unmeteredQueue struct {
	mu      sync.Mutex
	q       []unmeteredCharge
	nudge   chan struct{}
	started sync.Once
	lastErr string // the last error that held the queue (the loop's own)

	counted   *prometheus.CounterVec // fak_gateway_unmetered_charges_total{reason}
	journaled prometheus.Counter     // fak_gateway_unmetered_journaled_total
	lost      *prometheus.CounterVec // fak_gateway_unmetered_lost_total{reason}
}

func newUnmeteredQueue(reg prometheus.Registerer) *unmeteredQueue {
	u := &unmeteredQueue{nudge: make(chan struct{}, 1)}
	u.counted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fak_gateway_unmetered_charges_total",
		Help: "Answered model calls through this node's gateway whose charge could not be committed when they ended, by reason (a Connect code or fak reason); each is journaled late.",
	}, []string{"reason"})
	u.journaled = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fak_gateway_unmetered_journaled_total",
		Help: "Unmetered charges this node's gateway journaled late (budget.charged with unmetered).",
	})
	u.lost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fak_gateway_unmetered_lost_total",
		Help: "Unmetered charges that could not be journaled at all (the FSM refused them, the queue was full), each logged at error level with its usage.",
	}, []string{"reason"})
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fak_gateway_unmetered_pending",
		Help: "Unmetered charges this node's gateway holds, not yet journaled.",
	}, func() float64 { return float64(u.len()) })
	reg.MustRegister(u.counted, u.journaled, u.lost, pending)
	return u
}

func (u *unmeteredQueue) len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.q)
}

// reasonOf names why a charge failed: fak's reason, else the Connect
// code, upper case (bounded labels).
func reasonOf(err error) string {
	if r := apiclient.ErrorInfo(err).GetReason(); r != "" {
		return r
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "DEADLINE_EXCEEDED"
	}
	return strings.ToUpper(connect.CodeOf(err).String())
}

// journalLater: the cluster may take the charge later (no leader, a
// credential refused until a reload, a timeout); the others are the FSM
// refusing the charge itself, which no retry changes.
func journalLater(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeFailedPrecondition,
		connect.CodeAlreadyExists, connect.CodeOutOfRange:
		return false
	}
	return true
}

// unmetered keeps a charge the gateway gave up on and makes sure the
// journaling loop runs.
func (s *Server) unmetered(c unmeteredCharge) {
	u := s.unmeteredQ
	u.counted.WithLabelValues(c.reason).Inc()
	s.logger.Warn("gateway: a model call's usage could not be charged when it ended; it will be journaled as unmetered",
		"session", c.adm.SessionID, "launch", c.adm.LaunchID, "usage", c.usage.String(), "reason", c.reason, "request_id", c.requestID)
	u.mu.Lock()
	full := len(u.q) >= maxUnmetered
	if !full {
		u.q = append(u.q, c)
	}
	u.mu.Unlock()
	if full {
		u.lost.WithLabelValues("queue_full").Inc()
		s.logger.Error("gateway: usage lost: the unmetered queue is full", "session", c.adm.SessionID, "launch", c.adm.LaunchID,
			"usage", c.usage.String(), "request_id", c.requestID)
		return
	}
	select {
	case <-s.shutdownCh:
		// The loop has stopped (or is stopping): say so now.
		s.logger.Error("gateway: node stopping with an unmetered charge not journaled", "session", c.adm.SessionID,
			"launch", c.adm.LaunchID, "usage", c.usage.String(), "reason", c.reason, "request_id", c.requestID)
		return
	default:
	}
	u.started.Do(func() { go s.journalUnmetered() })
	u.poke()
}

func (u *unmeteredQueue) poke() {
	select {
	case u.nudge <- struct{}{}:
	default:
	}
}

// journalUnmetered tries the queue at every nudge and every
// unmeteredRetry until the server shuts down.
func (s *Server) journalUnmetered() {
	u := s.unmeteredQ
	t := time.NewTicker(unmeteredRetry)
	defer t.Stop()
	for {
		select {
		case <-s.shutdownCh:
			u.mu.Lock()
			for _, c := range u.q {
				s.logger.Error("gateway: node stopping with an unmetered charge not journaled", "session", c.adm.SessionID,
					"launch", c.adm.LaunchID, "usage", c.usage.String(), "reason", c.reason, "request_id", c.requestID)
			}
			u.mu.Unlock()
			return
		case <-u.nudge:
		case <-t.C:
		}
		s.drainUnmetered()
	}
}

// drainUnmetered journals what it can, in order, and stops at the first
// charge the cluster cannot take yet (no leader, a refused credential).
func (s *Server) drainUnmetered() {
	u := s.unmeteredQ
	m := gatewayMeter{s}
	for {
		u.mu.Lock()
		if len(u.q) == 0 {
			u.mu.Unlock()
			return
		}
		c := u.q[0]
		u.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := m.record(ctx, c.adm, BudgetToAPI(c.usage), c.requestID, true, c.reason)
		cancel()
		if err != nil && journalLater(err) {
			if msg := err.Error(); msg != u.lastErr {
				u.lastErr = msg
				s.logger.Warn("gateway: unmetered charges wait: the cluster cannot take them yet", "pending", u.len(), "error", err)
			}
			return // the cluster cannot take it yet: the next chance
		}
		u.lastErr = ""
		u.mu.Lock()
		u.q = u.q[1:]
		u.mu.Unlock()
		if err != nil {
			u.lost.WithLabelValues(reasonOf(err)).Inc()
			s.logger.Error("gateway: usage lost: the cluster refused an unmetered charge", "session", c.adm.SessionID,
				"launch", c.adm.LaunchID, "usage", c.usage.String(), "request_id", c.requestID, "error", err)
			continue
		}
		u.journaled.Inc()
		s.logger.Info("gateway: an unmetered charge journaled", "session", c.adm.SessionID, "launch", c.adm.LaunchID,
			"usage", c.usage.String(), "reason", c.reason, "request_id", c.requestID)
	}
}
