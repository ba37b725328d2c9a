package api

import (
	"context"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fak-dev/fak/api/gateway"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// Metrics of the API layer, registered in the node's own registry (several
// nodes share a process in `fak dev` and tests, so never the global one).
// Labels are bounded: procedures are the registered ones (the mux answers
// unknown paths before any interceptor runs), codes are Connect's.
type apiMetrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	forwarded *prometheus.CounterVec
	hooks     *prometheus.CounterVec
	gwCalls   *prometheus.CounterVec
	gwTokens  *prometheus.CounterVec
}

func newAPIMetrics(reg prometheus.Registerer) *apiMetrics {
	m := &apiMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fak_rpc_requests_total",
			Help: "RPCs handled by this node, by procedure and Connect code (streams counted when they end).",
		}, []string{"procedure", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fak_rpc_duration_seconds",
			Help:    "Time to handle an RPC, by procedure and Connect code (a stream: its whole life).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"procedure", "code"}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fak_forwarded_calls_total",
			Help: "Calls this node sent to the leader (a write, or the read index of a linearizable read), by the procedure they serve and the leader's Connect code; each retry counts.",
		}, []string{"procedure", "code"}),
		hooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fak_hook_deliveries_total",
			Help: "Provider hook deliveries received by this node (LifecycleService), by hook and outcome (applied, duplicate, error).",
		}, []string{"hook", "outcome"}),
	}
	m.gwCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fak_gateway_calls_total",
		Help: "Model calls through this node's gateway, by provider and outcome (charged, refused, upstream_error, unmetered).",
	}, []string{"provider", "outcome"})
	m.gwTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fak_gateway_tokens_total",
		Help: "Tokens the upstreams reported for calls through this node's gateway, by provider and kind (input, output).",
	}, []string{"provider", "kind"})
	reg.MustRegister(m.requests, m.duration, m.forwarded, m.hooks, m.gwCalls, m.gwTokens)
	return m
}

// codeLabel is the Connect code of an RPC's outcome, "ok" for success.
func codeLabel(err error) string {
	if err == nil {
		return "ok"
	}
	return connect.CodeOf(err).String()
}

// procedureOf names the RPC being handled under ctx.
func procedureOf(ctx context.Context) string {
	if ci, ok := connect.CallInfoForHandlerContext(ctx); ok {
		return ci.Spec().Procedure
	}
	return "unknown"
}

// Hooks and their outcomes for fak_hook_deliveries_total.
const (
	hookBindLaunch = "bind_launch"
	hookStart      = "provider_session_start"
	hookEnd        = "provider_session_end"

	hookApplied   = "applied"
	hookDuplicate = "duplicate"
	hookError     = "error"
)

// redelivery: the FSM recognised a provider hook it had acted on before
// (another request id, same provider facts) and changed nothing. A retry
// with the same request id is answered from the deduplication table with
// the first result, so it counts as applied.
func redelivery(b *fakv1.Boundary) bool { return b.GetAction() == "no_op" }

// observeHook counts one hook delivery where it entered the fleet: a call
// forwarded from another node was counted there.
func (s *Server) observeHook(hdr http.Header, hook string, duplicate bool, err error) {
	if hdr.Get(headerForwarded) != "" {
		return
	}
	outcome := hookApplied
	switch {
	case err != nil:
		outcome = hookError
	case duplicate:
		outcome = hookDuplicate
	}
	s.metrics.hooks.WithLabelValues(hook, outcome).Inc()
}

// callInterceptor measures and logs every RPC this node serves. It runs
// outside authentication, so refused calls are counted and logged too.
type callInterceptor struct{ s *Server }

func (c callInterceptor) end(ctx context.Context, procedure string, hdr http.Header, start time.Time, err error) {
	d := time.Since(start)
	code := codeLabel(err)
	c.s.metrics.requests.WithLabelValues(procedure, code).Inc()
	c.s.metrics.duration.WithLabelValues(procedure, code).Observe(d.Seconds())
	c.s.logCall(ctx, procedure, hdr, code, d, err)
}

func (c callInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		start := time.Now()
		resp, err := next(ctx, req)
		c.end(ctx, req.Spec().Procedure, req.Header(), start, err)
		return resp, err
	}
}

func (c callInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (c callInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		err := next(ctx, conn)
		c.end(ctx, conn.Spec().Procedure, conn.RequestHeader(), start, err)
		return err
	}
}

// metricsHandler serves the node's registry in the Prometheus text format,
// itself instrumented (promhttp_metric_handler_requests_total).
func (s *Server) metricsHandler() http.Handler {
	return promhttp.InstrumentMetricHandler(s.cfg.Metrics,
		promhttp.HandlerFor(s.cfg.Metrics, promhttp.HandlerOpts{
			Registry: s.cfg.Metrics,
			// One failing collector (say, the FSM census during a
			// restore) must not blank the rest of the page.
			ErrorHandling: promhttp.ContinueOnError,
			ErrorLog:      s.logger.Named("metrics").StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
		}))
}

// gatewayCall counts one call through the gateway.
func (m *apiMetrics) gatewayCall(provider, outcome string, u gateway.Usage) {
	m.gwCalls.WithLabelValues(provider, outcome).Inc()
	if u.Seen {
		m.gwTokens.WithLabelValues(provider, "input").Add(float64(u.Prompt()))
		m.gwTokens.WithLabelValues(provider, "output").Add(float64(u.OutputTokens))
	}
}
