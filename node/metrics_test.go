package node_test

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fak-dev/fak/api"
	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// logSink collects one node's log lines; safe for the node's goroutines.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// lineWith: some log line holds every one of parts.
func (s *logSink) lineWith(parts ...string) bool {
	for _, line := range strings.Split(s.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// scrape fetches a node's /metrics with the given token ("" = none). The
// fleet is plaintext (no Options.TLS).
func scrape(t testing.TB, c *testcluster.Cluster, n *testcluster.Node, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+n.APIAddr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", n.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s metrics: %v", n.Name, err)
	}
	return resp.StatusCode, mfs
}

// value of the first series of name whose labels include labels (histograms:
// the sample count); ok false if there is none.
func value(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	mf, ok := mfs[name]
	if !ok {
		return 0, false
	}
series:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

const createProc = "/fak.v1.SessionService/CreateSession"

func TestMetricsAndRequestIDs(t *testing.T) {
	var mu sync.Mutex
	logs := map[string]*logSink{}
	c := testcluster.New(t, testcluster.Options{
		SnapshotThreshold: 4,
		Configure: func(name string, cfg *node.Config) {
			sink := &logSink{}
			mu.Lock()
			logs[name] = sink
			mu.Unlock()
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Debug, Output: sink})
			cfg.SnapshotInterval = 100 * time.Millisecond
		},
	})
	leader := c.WaitForLeader(30 * time.Second)
	follower := c.Followers()[0]
	logOf := func(n *testcluster.Node) *logSink { mu.Lock(); defer mu.Unlock(); return logs[n.Name] }

	// Writes to a follower are forwarded; the first carries a request id.
	const viaFollower, viaLeader = 5, 2
	for i := range viaFollower {
		req := connect.NewRequest(&fakv1.CreateSessionRequest{Title: "metrics"})
		if i == 0 {
			req.Header().Set(api.HeaderRequestID, "abc-metrics-1")
		}
		resp, err := c.Sessions(follower).CreateSession(ctxT(t, 15*time.Second), req)
		if err != nil {
			t.Fatalf("create via %s: %v", follower.Name, err)
		}
		got := resp.Header().Get(api.HeaderRequestID)
		if i == 0 && got != "abc-metrics-1" {
			t.Fatalf("response X-Request-Id = %q, want the client's abc-metrics-1", got)
		}
		if got == "" {
			t.Fatal("response without X-Request-Id")
		}
	}
	for range viaLeader {
		createSession(t, c, leader, "metrics")
	}
	total := float64(viaFollower + viaLeader)

	// The forwarded write is logged on both nodes under the client's id.
	c.WaitFor(10*time.Second, "the leader logs the forwarded call under the client's request id", func() bool {
		return logOf(leader).lineWith("request_id=abc-metrics-1", createProc, "forwarded_by="+follower.Name) &&
			logOf(follower).lineWith("request_id=abc-metrics-1", createProc)
	})

	// Every node: Raft status, build info, runtime metrics, the census.
	for _, n := range c.Nodes {
		c.WaitFor(10*time.Second, n.Name+" reports every session active", func() bool {
			_, mfs := scrape(t, c, n, testcluster.Token)
			v, _ := value(mfs, "fak_sessions", map[string]string{"state": "active"})
			return v == total
		})
		_, mfs := scrape(t, c, n, testcluster.Token)
		if v, ok := value(mfs, "fak_raft_term", nil); !ok || v < 1 {
			t.Errorf("%s: fak_raft_term = %v (present %v), want >= 1", n.Name, v, ok)
		}
		if v, _ := value(mfs, "fak_raft_leader_known", nil); v != 1 {
			t.Errorf("%s: fak_raft_leader_known = %v", n.Name, v)
		}
		if v, _ := value(mfs, "fak_fsm_apply_batch_entries", nil); v == 0 {
			t.Errorf("%s: no FSM apply batch observed", n.Name)
		}
		for _, name := range []string{"fak_build_info", "go_goroutines", "fak_raft_applied_index", "fak_leases_held", "fak_attachments", "fak_moves_open"} {
			if _, ok := value(mfs, name, nil); !ok {
				t.Errorf("%s: %s missing", n.Name, name)
			}
		}
	}

	// Exactly one node says it leads (each node answers for itself).
	c.WaitFor(10*time.Second, "exactly one node reporting leader", func() bool {
		leaders := 0
		for _, n := range c.Nodes {
			_, mfs := scrape(t, c, n, testcluster.Token)
			if v, _ := value(mfs, "fak_raft_state", map[string]string{"state": "leader"}); v == 1 {
				leaders++
			}
		}
		return leaders == 1
	})

	_, fm := scrape(t, c, follower, testcluster.Token)
	if v, _ := value(fm, "fak_rpc_requests_total", map[string]string{"procedure": createProc, "code": "ok"}); v < viaFollower {
		t.Errorf("follower CreateSession ok = %v, want >= %d", v, viaFollower)
	}
	if v, _ := value(fm, "fak_forwarded_calls_total", map[string]string{"procedure": createProc, "code": "ok"}); v < viaFollower {
		t.Errorf("follower forwarded CreateSession = %v, want >= %d", v, viaFollower)
	}
	_, lm := scrape(t, c, leader, testcluster.Token)
	if v, _ := value(lm, "fak_rpc_requests_total", map[string]string{"procedure": createProc, "code": "ok"}); v < total {
		t.Errorf("leader CreateSession ok = %v, want >= %v (its own and the forwarded)", v, total)
	}
	if v, _ := value(lm, "fak_raft_apply_duration_seconds", nil); v < total {
		t.Errorf("leader apply latency samples = %v, want >= %v", v, total)
	}
	if v, _ := value(lm, "fak_raft_entry_commands", nil); v == 0 {
		t.Error("leader observed no Raft entry")
	}

	// Snapshots (threshold 4, checked every 100ms) are measured.
	c.WaitFor(20*time.Second, "a measured FSM snapshot", func() bool {
		for _, n := range c.Nodes {
			_, mfs := scrape(t, c, n, testcluster.Token)
			ok, _ := value(mfs, "fak_fsm_snapshots_total", map[string]string{"outcome": "ok"})
			size, _ := value(mfs, "fak_fsm_snapshot_size_bytes", nil)
			if ok >= 1 && size > 0 {
				return true
			}
		}
		return false
	})

	// /metrics is not public when auth is on.
	for _, tok := range []string{"", "not-a-token"} {
		if code, _ := scrape(t, c, follower, tok); code != http.StatusUnauthorized {
			t.Errorf("/metrics with token %q: status %d, want 401", tok, code)
		}
	}
}

// TestBadTokenNotLogged: a refused call is logged (with its request id and
// code) but the token it carried appears in no log line.
func TestBadTokenNotLogged(t *testing.T) {
	var mu sync.Mutex
	logs := map[string]*logSink{}
	c := testcluster.New(t, testcluster.Options{
		Configure: func(name string, cfg *node.Config) {
			sink := &logSink{}
			mu.Lock()
			logs[name] = sink
			mu.Unlock()
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Trace, Output: sink})
		},
	})
	const secret = "sekrit-not-a-token-42"
	n := c.Followers()[0]
	client := fakv1connect.NewSessionServiceClient(c.HTTPClient(), "http://"+n.APIAddr, connect.WithInterceptors(apiclient.Bearer(secret)))
	req := connect.NewRequest(&fakv1.CreateSessionRequest{Title: "x"})
	req.Header().Set(api.HeaderRequestID, "bad-token-call")
	_, err := client.CreateSession(ctxT(t, 10*time.Second), req)
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("create with a bad token: %v, want unauthenticated", err)
	}
	mu.Lock()
	sink := logs[n.Name]
	mu.Unlock()
	c.WaitFor(10*time.Second, "the refused call logged", func() bool {
		return sink.lineWith("request_id=bad-token-call", "code=unauthenticated")
	})
	mu.Lock()
	defer mu.Unlock()
	for name, s := range logs {
		if strings.Contains(s.String(), secret) {
			t.Errorf("%s's log holds the bearer token", name)
		}
	}
}
