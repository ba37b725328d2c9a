package node_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	"github.com/fak-dev/fak/api/gateway"
	"github.com/fak-dev/fak/api/gateway/gatewaytest"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// gatewayFleet is a three-node fleet whose gateways forward all three
// providers to one fake upstream, with integer prices (exact micros).
func gatewayFleet(t testing.TB) (*testcluster.Cluster, *gatewaytest.Upstream) {
	up := gatewaytest.New()
	t.Cleanup(up.Close)
	t.Setenv("FAK_TEST_UPSTREAM_KEY", "sk-upstream")
	c := testcluster.New(t, testcluster.Options{Configure: func(name string, cfg *node.Config) {
		for _, p := range []string{gateway.Anthropic, gateway.OpenAI, gateway.Gemini} {
			cfg.Accounts = append(cfg.Accounts, node.AccountConfig{Name: p + "-main", Provider: p, Upstream: up.URL, APIKeyEnv: "FAK_TEST_UPSTREAM_KEY"})
		}
		cfg.Prices = []node.PriceConfig{
			{Model: "claude-*", Price: gateway.Price{InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 1}},
			{Model: "gpt-*", Price: gateway.Price{InputPerMTok: 2, OutputPerMTok: 8, CacheReadPerMTok: 1}},
			{Model: "gemini-*", Price: gateway.Price{InputPerMTok: 1, OutputPerMTok: 4}},
		}
	}})
	c.WaitForLeader(30 * time.Second)
	return c, up
}

// gatewayCall is one model call of one of the four APIs, streamed or not.
type gatewayCall struct {
	path, model string
	stream      bool
}

var gatewayCalls = []gatewayCall{
	{"anthropic/v1/messages", "claude-sonnet-4", true},
	{"anthropic/v1/messages", "claude-sonnet-4", false},
	{"openai/v1/chat/completions", "gpt-4.1", true},
	{"openai/v1/chat/completions", "gpt-4.1", false},
	{"openai/v1/responses", "gpt-5", true},
	{"openai/v1/responses", "gpt-5", false},
	{"gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "gemini-2.5-pro", true},
	{"gemini/v1beta/models/gemini-2.5-pro:generateContent", "gemini-2.5-pro", false},
}

// do sends call i (its body differs per i, so its usage does) to base
// (a node's gateway URL, /gateway/ or a launch path) and reads the whole
// answer.
func (gc gatewayCall) do(t testing.TB, client *http.Client, base string, i int, hdr map[string]string) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"call %d"}]}`, gc.model, gc.stream, i)
	req, _ := http.NewRequest(http.MethodPost, base+gc.path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	// fak's token, sent the way each provider's client sends its key.
	switch {
	case strings.HasPrefix(gc.path, "anthropic"):
		req.Header.Set("X-Api-Key", testcluster.Token)
	case strings.HasPrefix(gc.path, "gemini"):
		req.Header.Set("X-Goog-Api-Key", testcluster.Token)
	default:
		req.Header.Set("Authorization", "Bearer "+testcluster.Token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func envelopeOf(t testing.TB, c *testcluster.Cluster, n *testcluster.Node, id string) *fakv1.Envelope {
	t.Helper()
	d, err := c.Sessions(n).DescribeSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.DescribeSessionRequest{
		SessionId: id, Consistency: fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE}))
	if err != nil {
		t.Fatal(err)
	}
	return d.Msg.GetBudget()
}

// Every API, streamed and not, through every node: the envelope's totals
// equal what the upstream reported, exactly, and the spend is the price
// table's.
func TestGateway_MetersEveryAPIExactly(t *testing.T) {
	c, up := gatewayFleet(t)
	id := createSession(t, c, c.Leader(), "metered")
	const rounds = 6
	var wg sync.WaitGroup
	for i, n := range []*testcluster.Node{c.Node("n1"), c.Node("n2"), c.Node("n3")} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				for j, gc := range gatewayCalls {
					if code, body := gc.do(t, c.HTTPClient(), c.BaseURL(n)+gateway.Prefix, (i*rounds+r)*100+j, map[string]string{gateway.HeaderTraceID: id}); code != 200 {
						t.Errorf("%s via %s: %d %s", gc.path, n.Name, code, body)
					}
				}
			}
		}()
	}
	wg.Wait()
	want := up.Totals()
	calls := uint64(3 * rounds * len(gatewayCalls))
	if want.Calls != calls {
		t.Fatalf("the upstream answered %d calls with usage, want %d", want.Calls, calls)
	}
	var env *fakv1.Envelope
	c.WaitFor(30*time.Second, "every charge", func() bool {
		env = envelopeOf(t, c, c.Leader(), id)
		return env.GetUsed().GetQueries() >= calls
	})
	u := env.GetUsed()
	if u.GetQueries() != calls || u.GetInputTokens() != want.PromptTokens || u.GetOutputTokens() != want.OutputTokens {
		t.Fatalf("charged %d queries, %d input, %d output tokens; the upstream reported %d calls, %d prompt, %d output",
			u.GetQueries(), u.GetInputTokens(), u.GetOutputTokens(), want.Calls, want.PromptTokens, want.OutputTokens)
	}
	if u.GetSpendMicros() == 0 {
		t.Fatal("no spend charged: the price table was not applied")
	}
}

// An exhausted envelope is refused in the provider's shape, 429 naming
// BUDGET_EXHAUSTED and the axis, without a request to the upstream, and
// the refusal is journaled. A call that passes the limit is charged in
// full (it happened).
func TestGateway_RefusesAnExhaustedEnvelopeWithoutTheUpstream(t *testing.T) {
	c, up := gatewayFleet(t)
	f := c.Followers()[0]
	r, err := c.Sessions(f).CreateSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.CreateSessionRequest{
		Title: "capped", Policy: &fakv1.Policy{Limits: &fakv1.Budget{OutputTokens: 1}}}))
	if err != nil {
		t.Fatal(err)
	}
	id := r.Msg.Session.SessionId
	base := c.BaseURL(f) + gateway.Prefix
	hdr := map[string]string{gateway.HeaderTraceID: id}
	if code, body := gatewayCalls[0].do(t, c.HTTPClient(), base, 1, hdr); code != 200 {
		t.Fatalf("first call: %d %s", code, body)
	}
	reported := up.Totals()
	c.WaitFor(30*time.Second, "the charge past the limit", func() bool {
		return envelopeOf(t, c, f, id).GetUsed().GetOutputTokens() == reported.OutputTokens
	})
	before := up.Requests()
	for i, gc := range []gatewayCall{gatewayCalls[0], gatewayCalls[3], gatewayCalls[7]} {
		code, body := gc.do(t, c.HTTPClient(), base, 10+i, hdr)
		if code != http.StatusTooManyRequests || !strings.Contains(body, "BUDGET_EXHAUSTED") || !strings.Contains(body, "output_tokens") {
			t.Fatalf("%s on an exhausted envelope: %d %s", gc.path, code, body)
		}
		var shape map[string]any
		if err := json.Unmarshal([]byte(body), &shape); err != nil || shape["error"] == nil {
			t.Fatalf("%s: body %s is not the provider's error shape", gc.path, body)
		}
	}
	if n := up.Requests() - before; n != 0 {
		t.Fatalf("%d refused calls reached the upstream", n)
	}
	refusals := 0
	for _, ev := range readAll(t, c, f, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE) {
		if ev.Kind == "budget.exhausted" {
			refusals++
		}
	}
	// One journaled when the call passed the limit, one per refusal.
	if refusals != 4 {
		t.Fatalf("%d budget.exhausted events, want 4 (the call that passed the limit and 3 refusals)", refusals)
	}
	_, mfs := scrape(t, c, f, testcluster.Token)
	for labels, want := range map[[2]string]float64{{"anthropic", "charged"}: 1, {"anthropic", "refused"}: 1, {"openai", "refused"}: 1, {"gemini", "refused"}: 1} {
		if v, _ := value(mfs, "fak_gateway_calls_total", map[string]string{"provider": labels[0], "outcome": labels[1]}); v != want {
			t.Errorf("fak_gateway_calls_total{provider=%q,outcome=%q} = %v, want %v", labels[0], labels[1], v, want)
		}
	}
	if v, _ := value(mfs, "fak_gateway_tokens_total", map[string]string{"provider": "anthropic", "kind": "output"}); v != float64(reported.OutputTokens) {
		t.Errorf("fak_gateway_tokens_total output = %v, want %d", v, reported.OutputTokens)
	}
}

// A call through a launch charges the launch's default session; after the
// provider's clear it charges the child at once.
func TestGateway_ChargesTheLaunchDefaultSessionAcrossAClear(t *testing.T) {
	c, _ := gatewayFleet(t)
	n := c.Followers()[0]
	lc := fakv1connect.NewLifecycleServiceClient(c.HTTPClient(), c.BaseURL(n), connect.WithInterceptors(apiclient.Bearer(testcluster.Token)))
	bound, err := lc.BindLaunch(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.BindLaunchRequest{LaunchId: "lnc_gw", Provider: "claude", Host: "laptop"}))
	if err != nil {
		t.Fatal(err)
	}
	parent := bound.Msg.GetSession().GetSessionId()
	hook := func(source, pid string) {
		if _, err := lc.ProviderSessionStart(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.ProviderSessionStartRequest{
			LaunchId: "lnc_gw", Provider: "claude", Source: source, ProviderSessionId: pid})); err != nil {
			t.Fatal(err)
		}
	}
	hook("startup", "c-1")
	base := c.BaseURL(n) + gateway.Prefix + "launch/lnc_gw/"
	if code, body := gatewayCalls[1].do(t, c.HTTPClient(), base, 1, nil); code != 200 {
		t.Fatalf("call before the clear: %d %s", code, body)
	}
	charged := func(id string) int {
		k := 0
		for _, ev := range readAll(t, c, n, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE) {
			if ev.Kind == "budget.charged" {
				k++
			}
		}
		return k
	}
	// The charge names the launch; the FSM resolves its default session
	// as it applies. Let the first land before the clear.
	c.WaitFor(30*time.Second, "the parent's charge", func() bool { return charged(parent) == 1 })
	hook("clear", "c-2")
	d, err := lc.DescribeLaunch(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.DescribeLaunchRequest{LaunchId: "lnc_gw"}))
	if err != nil {
		t.Fatal(err)
	}
	child := d.Msg.DefaultSession
	if child == parent {
		t.Fatal("the clear did not move the launch's default session")
	}
	if code, body := gatewayCalls[1].do(t, c.HTTPClient(), base, 2, nil); code != 200 {
		t.Fatalf("call after the clear: %d %s", code, body)
	}
	c.WaitFor(30*time.Second, "the child's charge", func() bool { return charged(child) == 1 })
	if k := charged(parent); k != 1 {
		t.Fatalf("parent charged %d times, want once (before the clear)", k)
	}
}
