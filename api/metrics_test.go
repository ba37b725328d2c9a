package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func newTestServer(t testing.TB, logger hclog.Logger) *Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	return &Server{cfg: Config{NodeName: "n1", Metrics: reg}, logger: logger, metrics: newAPIMetrics(reg)}
}

// counterValue reads one labelled series from the registry (0 if absent).
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue series
				}
			}
			return metricValue(m)
		}
	}
	return 0
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

func TestCallInterceptorCountsByProcedureAndCode(t *testing.T) {
	s := newTestServer(t, hclog.NewNullLogger())
	fail := false
	call := callInterceptor{s}.WrapUnary(func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) {
		if fail {
			return nil, connect.NewError(connect.CodeNotFound, errors.New("no such session"))
		}
		return connect.NewResponse(&struct{}{}), nil
	})
	for range 3 {
		call(context.Background(), connect.NewRequest(&struct{}{}))
	}
	fail = true
	call(context.Background(), connect.NewRequest(&struct{}{}))

	// connect.NewRequest carries no procedure (it is set by the handler).
	reg := s.cfg.Metrics
	if v := counterValue(t, reg, "fak_rpc_requests_total", map[string]string{"procedure": "", "code": "ok"}); v != 3 {
		t.Errorf("ok requests = %v, want 3", v)
	}
	if v := counterValue(t, reg, "fak_rpc_requests_total", map[string]string{"code": "not_found"}); v != 1 {
		t.Errorf("not_found requests = %v, want 1", v)
	}
	if v := counterValue(t, reg, "fak_rpc_duration_seconds", map[string]string{"code": "ok"}); v != 3 {
		t.Errorf("ok duration samples = %v, want 3", v)
	}
}

func TestObserveHookCountsWhereTheHookEntered(t *testing.T) {
	s := newTestServer(t, hclog.NewNullLogger())
	direct, forwarded := http.Header{}, http.Header{}
	forwarded.Set(headerForwarded, "n2")
	s.observeHook(direct, hookStart, false, nil)
	s.observeHook(direct, hookStart, true, nil)
	s.observeHook(direct, hookStart, true, errors.New("refused"))
	s.observeHook(forwarded, hookStart, false, nil) // counted by the node it entered
	reg := s.cfg.Metrics
	for outcome, want := range map[string]float64{hookApplied: 1, hookDuplicate: 1, hookError: 1} {
		if v := counterValue(t, reg, "fak_hook_deliveries_total", map[string]string{"hook": hookStart, "outcome": outcome}); v != want {
			t.Errorf("%s = %v, want %v", outcome, v, want)
		}
	}
}

func TestMetricsHandlerServesRegistry(t *testing.T) {
	s := newTestServer(t, hclog.NewNullLogger())
	s.metrics.requests.WithLabelValues("/fak.v1.SessionService/CreateSession", "ok").Inc()
	rec := httptest.NewRecorder()
	s.metricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	body := rec.Body.String()
	want := `fak_rpc_requests_total{code="ok",procedure="/fak.v1.SessionService/CreateSession"} 1`
	if !strings.Contains(body, want) {
		t.Fatalf("metrics page lacks %q:\n%s", want, body)
	}
}

// BenchmarkCallInterceptor is the cost the interceptor adds to each RPC
// (two labelled metric updates, the clock, the log-level check), against
// the bare handler.
func BenchmarkCallInterceptor(b *testing.B) {
	next := func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) { return nil, nil }
	req := connect.NewRequest(&struct{}{})
	ctx := context.WithValue(context.Background(), requestIDKey{}, "abc")
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			next(ctx, req)
		}
	})
	b.Run("intercepted", func(b *testing.B) {
		call := callInterceptor{newTestServer(b, hclog.NewNullLogger())}.WrapUnary(next)
		for b.Loop() {
			call(ctx, req)
		}
	})
	b.Run("request_id", func(b *testing.B) {
		h := withRequestID(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		r := httptest.NewRequest("POST", "/x", nil)
		w := httptest.NewRecorder()
		for b.Loop() {
			r.Header.Del(HeaderRequestID)
			h.ServeHTTP(w, r)
		}
	})
}
