package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// fakeMeter records admissions and charges; refuse, when set, refuses.
type fakeMeter struct {
	mu      sync.Mutex
	calls   []Call
	charges []*fsmpb.Budget
	refuse  *Refusal
	charged chan struct{}
}

func (m *fakeMeter) Admit(_ context.Context, c Call) (Admission, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, c)
	if m.refuse != nil {
		return Admission{}, m.refuse
	}
	return Admission{SessionID: c.TraceID, LaunchID: c.LaunchID}, nil
}

func (m *fakeMeter) Charge(_ Admission, u *fsmpb.Budget, _ string) {
	m.mu.Lock()
	m.charges = append(m.charges, u)
	m.mu.Unlock()
	m.charged <- struct{}{}
}

func (m *fakeMeter) waitCharge(t *testing.T) *fsmpb.Budget {
	t.Helper()
	select {
	case <-m.charged:
	case <-time.After(10 * time.Second):
		t.Fatal("no charge")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.charges[len(m.charges)-1]
}

// upstream is a fake provider: it counts requests, records the last one,
// and answers by path.
type upstream struct {
	*httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	lastBody []byte
	lastHdr  http.Header
}

func newUpstream(t *testing.T, serve func(w http.ResponseWriter, r *http.Request)) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.lastBody, u.lastHdr = b, r.Header.Clone()
		u.mu.Unlock()
		serve(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func sse(t *testing.T, name string) func(w http.ResponseWriter, r *http.Request) {
	body := fixture(t, name)
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(body)
	}
}

func newGateway(t *testing.T, up *upstream, provider string, m *fakeMeter) *httptest.Server {
	prices, err := NewPriceTable(map[string]Price{"claude-sonnet-4*": {InputPerMTok: 3, OutputPerMTok: 15}, "gpt-4o*": {InputPerMTok: 2.5, OutputPerMTok: 10}})
	if err != nil {
		t.Fatal(err)
	}
	h := New(Options{
		Accounts: []Account{{Name: "main", Provider: provider, Upstream: up.URL, Key: func() (string, error) { return "sk-account", nil }}},
		Prices:   prices, Meter: m,
		Authorize: func(tok string) error {
			if tok != "fak-token" {
				return errors.New("invalid token")
			}
			return nil
		},
	})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Wait() })
	return srv
}

func post(t *testing.T, url string, hdr map[string]string, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestGateway_StreamsAndCharges(t *testing.T) {
	up := newUpstream(t, sse(t, "anthropic_tool_use.sse"))
	m := &fakeMeter{charged: make(chan struct{}, 4)}
	gw := newGateway(t, up, Anthropic, m)
	resp := post(t, gw.URL+"/gateway/anthropic/v1/messages", map[string]string{"X-Api-Key": "fak-token", "X-Trace-Id": "s1", "Anthropic-Version": "2023-06-01"}, `{"model":"claude-sonnet-4-20250514","stream":true}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != string(fixture(t, "anthropic_tool_use.sse")) {
		t.Fatalf("status %d, body passed through changed: %q", resp.StatusCode, body)
	}
	b := m.waitCharge(t)
	// 377×3 + 65×15 micros.
	if b.Queries != 1 || b.InputTokens != 377 || b.OutputTokens != 65 || b.SpendMicros != 377*3+65*15 {
		t.Fatalf("charge %v", b)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if up.lastHdr.Get("X-Api-Key") != "sk-account" || up.lastHdr.Get("X-Trace-Id") != "" || up.lastHdr.Get("Anthropic-Version") != "2023-06-01" {
		t.Fatalf("upstream headers %v: want the account's key, anthropic-version kept, fak's headers dropped", up.lastHdr)
	}
	if c := m.calls[0]; c.TraceID != "s1" || c.Provider != Anthropic || c.Account != "main" {
		t.Fatalf("call %+v", c)
	}
}

func TestGateway_ExhaustedIsRefusedWithoutTheUpstream(t *testing.T) {
	up := newUpstream(t, sse(t, "openai_chat_tool.sse"))
	m := &fakeMeter{charged: make(chan struct{}, 4), refuse: &Refusal{Status: 429, Reason: "BUDGET_EXHAUSTED", Axis: "spend_micros", Message: "spend_micros budget of session s1 is exhausted"}}
	gw := newGateway(t, up, OpenAI, m)
	resp := post(t, gw.URL+"/gateway/openai/v1/chat/completions", map[string]string{"Authorization": "Bearer fak-token", "X-Trace-Id": "s1"}, `{"model":"gpt-4o","stream":true}`)
	defer resp.Body.Close()
	var e struct {
		Error struct{ Message, Type, Code string }
		Fak   map[string]string
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 429 || e.Error.Code != "BUDGET_EXHAUSTED" || e.Error.Type != "insufficient_quota" || e.Fak["axis"] != "spend_micros" {
		t.Fatalf("status %d, body %+v: want OpenAI's 429 shape naming BUDGET_EXHAUSTED and the axis", resp.StatusCode, e)
	}
	if n := up.requests.Load(); n != 0 {
		t.Fatalf("the upstream got %d requests; a refused call must not reach it", n)
	}
}

func TestGateway_UpstreamFailurePassesThroughUncharged(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(529)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	})
	m := &fakeMeter{charged: make(chan struct{}, 4)}
	gw := newGateway(t, up, Anthropic, m)
	resp := post(t, gw.URL+"/gateway/anthropic/v1/messages", map[string]string{"X-Api-Key": "fak-token", "X-Trace-Id": "s1"}, `{"model":"claude-sonnet-4"}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 529 || !strings.Contains(string(body), "overloaded_error") {
		t.Fatalf("status %d body %s: want the upstream's failure as is", resp.StatusCode, body)
	}
	// The handler returned (the body ended) having started no charge.
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.charges) != 0 {
		t.Fatalf("charged %v for a failed call", m.charges)
	}
}

func TestGateway_ChatStreamAsksForUsage(t *testing.T) {
	up := newUpstream(t, sse(t, "openai_chat_tool.sse"))
	m := &fakeMeter{charged: make(chan struct{}, 4)}
	gw := newGateway(t, up, OpenAI, m)
	resp := post(t, gw.URL+"/gateway/openai/v1/chat/completions", map[string]string{"Authorization": "Bearer fak-token", "X-Trace-Id": "s1"}, `{"model":"gpt-4o","stream":true,"messages":[]}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	b := m.waitCharge(t)
	if b.InputTokens != 76 || b.OutputTokens != 24 || b.SpendMicros != 76*2.5+24*10 {
		t.Fatalf("charge %v", b)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	var req struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(up.lastBody, &req); err != nil || !req.StreamOptions.IncludeUsage {
		t.Fatalf("upstream body %s: want stream_options.include_usage added", up.lastBody)
	}
}

func TestGateway_Auth(t *testing.T) {
	up := newUpstream(t, sse(t, "gemini.sse"))
	m := &fakeMeter{charged: make(chan struct{}, 4)}
	gw := newGateway(t, up, Gemini, m)
	resp := post(t, gw.URL+"/gateway/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", map[string]string{"X-Goog-Api-Key": "wrong", "X-Trace-Id": "s1"}, `{}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(body), "UNAUTHENTICATED") || up.requests.Load() != 0 {
		t.Fatalf("status %d body %s: want Gemini's 401 shape, nothing sent upstream", resp.StatusCode, body)
	}
	resp = post(t, gw.URL+"/gateway/launch/l1/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse&key=fak-token", nil, `{}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if b := m.waitCharge(t); b.InputTokens != 12 || b.OutputTokens != 8 {
		t.Fatalf("charge %v", b)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if c := m.calls[len(m.calls)-1]; c.LaunchID != "l1" || c.TraceID != "" {
		t.Fatalf("call %+v: want the launch of the path", c)
	}
	if up.lastHdr.Get("X-Goog-Api-Key") != "sk-account" {
		t.Fatalf("upstream headers %v", up.lastHdr)
	}
}

// A client that goes away midway is charged what the upstream reported
// so far: message_start's input tokens and its initial output.
func TestGateway_ClientGoneIsChargedWhatWasReported(t *testing.T) {
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4\",\"usage\":{\"input_tokens\":120,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	m := &fakeMeter{charged: make(chan struct{}, 4)}
	gw := newGateway(t, up, Anthropic, m)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw.URL+"/gateway/anthropic/v1/messages", strings.NewReader(`{"stream":true}`))
	req.Header.Set("X-Api-Key", "fak-token")
	req.Header.Set("X-Trace-Id", "s1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: message_start\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	cancel()
	resp.Body.Close()
	if b := m.waitCharge(t); b.InputTokens != 120 || b.OutputTokens != 1 || b.Queries != 1 || b.SpendMicros != 120*3+15 {
		t.Fatalf("charge %v", b)
	}
}

func TestParseRoute(t *testing.T) {
	for path, want := range map[string]route{
		"/gateway/anthropic/v1/messages":          {provider: Anthropic, rest: "/v1/messages"},
		"/gateway/launch/l-9/openai/v1/responses": {launch: "l-9", provider: OpenAI, rest: "/v1/responses"},
	} {
		if got, err := parseRoute(path); err != nil || got != want {
			t.Errorf("%s: %+v %v, want %+v", path, got, err, want)
		}
	}
	for _, bad := range []string{"/gateway/", "/gateway/azure/v1", "/gateway/launch//openai/v1", "/gateway/openai/v1/../../x"} {
		if _, err := parseRoute(bad); err == nil {
			t.Errorf("%s: want no route", bad)
		}
	}
}

// pass_through forwards the caller's own provider key when the caller
// authenticates to fak by X-Fak-Token; without it the account's key goes.
func TestGateway_PassThroughForwardsTheCallersOwnKey(t *testing.T) {
	up := newUpstream(t, sse(t, "anthropic_tool_use.sse"))
	m := &fakeMeter{charged: make(chan struct{}, 4)}
	h := New(Options{
		Accounts: []Account{{Name: "mine", Provider: Anthropic, Upstream: up.URL, PassThrough: true,
			Key: func() (string, error) { return "sk-account", nil }}},
		Meter: m,
		Authorize: func(tok string) error {
			return map[bool]error{true: nil, false: errors.New("invalid token")}[tok == "fak-token"]
		},
	})
	gw := httptest.NewServer(h)
	t.Cleanup(func() { gw.Close(); h.Wait() })
	for _, tc := range []struct {
		hdr  map[string]string
		want string
	}{
		{map[string]string{"X-Api-Key": "sk-caller", HeaderFakToken: "fak-token", "X-Trace-Id": "s1"}, "sk-caller"},
		{map[string]string{"X-Api-Key": "fak-token", "X-Trace-Id": "s1"}, "sk-account"}, // fak's token is not forwarded
	} {
		resp := post(t, gw.URL+"/gateway/anthropic/v1/messages", tc.hdr, `{"stream":true}`)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		m.waitCharge(t)
		up.mu.Lock()
		got := up.lastHdr.Get("X-Api-Key")
		up.mu.Unlock()
		if resp.StatusCode != 200 || got != tc.want {
			t.Fatalf("headers %v: status %d, upstream key %q, want %q", tc.hdr, resp.StatusCode, got, tc.want)
		}
	}
}
