package guard

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

// fakeLifecycle answers ProviderSessionStart like the FSM for the clear
// path: a new provider id moves the launch to a child, the bound id again is
// a no-op. It records every request.
type fakeLifecycle struct {
	fakv1connect.LifecycleServiceClient
	mu      sync.Mutex
	starts  []*fakv1.ProviderSessionStartRequest
	ends    []*fakv1.ProviderSessionEndRequest
	session string
	bound   string
	err     error
}

func (f *fakeLifecycle) ProviderSessionStart(_ context.Context, req *connect.Request[fakv1.ProviderSessionStartRequest]) (*connect.Response[fakv1.ProviderSessionStartResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, req.Msg)
	if f.err != nil {
		return nil, f.err
	}
	b := &fakv1.Boundary{Action: "no_op"}
	if req.Msg.ProviderSessionId != f.bound {
		b.Action, b.PreviousSessionId = req.Msg.Source, f.session
		f.session, f.bound = "ses_after_"+req.Msg.ProviderSessionId, req.Msg.ProviderSessionId
	}
	b.Session = &fakv1.Session{SessionId: f.session}
	return connect.NewResponse(&fakv1.ProviderSessionStartResponse{Boundary: b}), nil
}

func (f *fakeLifecycle) ProviderSessionEnd(_ context.Context, req *connect.Request[fakv1.ProviderSessionEndRequest]) (*connect.Response[fakv1.ProviderSessionEndResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ends = append(f.ends, req.Msg)
	return connect.NewResponse(&fakv1.ProviderSessionEndResponse{Boundary: &fakv1.Boundary{
		Action: "end", Session: &fakv1.Session{SessionId: f.session}}}), nil
}

func TestLaunchCommitsHooks(t *testing.T) {
	f := &fakeLifecycle{session: "ses_0", bound: "A"}
	l := newLaunch(f, "lnc_1", "claude", "ses_0", t.TempDir(), hookTimeout)
	ctx := testCtx(t)
	start := func(provider, raw string) Reply {
		return l.handle(ctx, Request{Event: EventSessionStart, Provider: provider, Payload: json.RawMessage(raw)})
	}

	r := start("", `{"source":"startup","session_id":"A","cwd":"/w"}`)
	if !r.OK || r.Action != "no_op" || r.SessionID != "ses_0" {
		t.Fatalf("startup reply %+v", r)
	}
	r = start("", `{"source":"clear","session_id":"B"}`)
	if !r.OK || r.Action != "clear" || r.SessionID != "ses_after_B" || r.PreviousSessionID != "ses_0" {
		t.Fatalf("clear reply %+v", r)
	}
	// The same clear delivered again: its request id differs from the first
	// (the launch moved since), so it reaches the FSM, which makes it a no-op.
	r = start("", `{"source":"clear","session_id":"B"}`)
	if !r.OK || r.Action != "no_op" || r.SessionID != "ses_after_B" {
		t.Fatalf("redelivered clear reply %+v", r)
	}
	if len(f.starts) != 3 {
		t.Fatalf("%d calls", len(f.starts))
	}
	s := f.starts[1]
	if s.LaunchId != "lnc_1" || s.Provider != "claude" || s.Source != "clear" || s.ProviderSessionId != "B" ||
		!strings.HasPrefix(s.RequestId, "req_hook_") || !json.Valid(s.MetadataJson) {
		t.Fatalf("request %+v", s)
	}
	if f.starts[1].RequestId == f.starts[2].RequestId {
		t.Fatal("a redelivery after the boundary reused the first delivery's request id")
	}

	// The guard's state file follows the launch.
	var st map[string]string
	b, err := os.ReadFile(filepath.Join(l.runDir, stateFile))
	if err != nil || json.Unmarshal(b, &st) != nil {
		t.Fatalf("state file: %v %s", err, b)
	}
	if st["session_id"] != "ses_after_B" || st["provider_session_id"] != "B" || st["launch_id"] != "lnc_1" {
		t.Fatalf("state = %v", st)
	}

	r = l.handle(ctx, Request{Event: EventSessionEnd, Provider: "gemini", Payload: json.RawMessage(geminiEnd)})
	if !r.OK || r.Action != "end" || len(f.ends) != 1 || f.ends[0].Reason != "clear" || f.ends[0].Provider != "gemini" {
		t.Fatalf("end reply %+v, requests %+v", r, f.ends)
	}
}

func TestHookRequestIDs(t *testing.T) {
	h := Hook{Event: EventSessionStart, Source: "clear", ProviderSessionID: "B"}
	id := hookRequestID("lnc_1", h, "ses_0")
	if id != hookRequestID("lnc_1", h, "ses_0") {
		t.Fatal("the same delivery must get the same request id (RPC-level idempotency)")
	}
	for _, other := range []string{
		hookRequestID("lnc_2", h, "ses_0"),
		hookRequestID("lnc_1", Hook{Event: EventSessionStart, Source: "startup", ProviderSessionID: "B"}, "ses_0"),
		hookRequestID("lnc_1", Hook{Event: EventSessionStart, Source: "clear", ProviderSessionID: "C"}, "ses_0"),
		hookRequestID("lnc_1", Hook{Event: EventSessionEnd, Reason: "clear", ProviderSessionID: "B"}, "ses_0"),
		hookRequestID("lnc_1", h, "ses_1"),
	} {
		if other == id {
			t.Fatalf("distinct deliveries share request id %s", id)
		}
	}
	if len(id) > 128 {
		t.Fatalf("request id %d bytes long", len(id))
	}
}

func TestLaunchReportsClusterErrors(t *testing.T) {
	f := &fakeLifecycle{err: connect.NewError(connect.CodeUnavailable, errors.New("dial tcp 127.0.0.1:7401: connection refused"))}
	l := newLaunch(f, "lnc_1", "codex", "ses_0", t.TempDir(), hookTimeout)
	r := l.handle(testCtx(t), Request{Event: EventSessionStart, Payload: json.RawMessage(codexStartup)})
	if r.OK || !strings.Contains(r.Error, "unreachable") {
		t.Fatalf("reply %+v", r)
	}
	if l.session != "ses_0" {
		t.Fatalf("a failed hook moved the guard's session to %q", l.session)
	}
	// A payload the guard cannot use never reaches the cluster.
	r = l.handle(testCtx(t), Request{Event: EventSessionStart, Payload: json.RawMessage(`{"source":"rewind","session_id":"X"}`)})
	if r.OK || len(f.starts) != 1 {
		t.Fatalf("reply %+v after %d calls", r, len(f.starts))
	}
}

func TestResolveAddrAndToken(t *testing.T) {
	for in, want := range map[string]string{
		"":                       DefaultAddr,
		":7402":                  "http://127.0.0.1:7402",
		"10.0.0.9:7401":          "http://10.0.0.9:7401",
		"https://fak.example/x/": "https://fak.example/x",
	} {
		got, err := ResolveAddr(in, envOf(nil))
		if err != nil || got != want {
			t.Errorf("ResolveAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got, _ := ResolveAddr("", envOf(map[string]string{"FAK_ADDR": "127.0.0.1:7403"})); got != "http://127.0.0.1:7403" {
		t.Errorf("FAK_ADDR ignored: %q", got)
	}
	if _, err := ResolveAddr("ftp://x", envOf(nil)); err == nil {
		t.Error("ftp:// accepted")
	}

	dir := t.TempDir()
	if got, err := ResolveToken("", envOf(nil), dir); err != nil || got != "" {
		t.Errorf("no token anywhere: %q, %v", got, err)
	}
	os.MkdirAll(filepath.Join(dir, ".fak-dev"), 0o700)
	os.WriteFile(filepath.Join(dir, DevTokenFile), []byte("dev-token\n"), 0o600)
	file := filepath.Join(dir, "tok")
	os.WriteFile(file, []byte(" file-token \n"), 0o600)
	for _, tc := range []struct {
		flag string
		env  map[string]string
		want string
	}{
		{"flag", map[string]string{"FAK_TOKEN": "env"}, "flag"},
		{"", map[string]string{"FAK_TOKEN": "env", "FAK_TOKEN_FILE": file}, "env"},
		{"", map[string]string{"FAK_TOKEN_FILE": file}, "file-token"},
		{"", nil, "dev-token"},
	} {
		if got, err := ResolveToken(tc.flag, envOf(tc.env), dir); err != nil || got != tc.want {
			t.Errorf("ResolveToken(%q, %v) = %q, %v; want %q", tc.flag, tc.env, got, err, tc.want)
		}
	}
	if _, err := ResolveToken("", envOf(map[string]string{"FAK_TOKEN_FILE": filepath.Join(dir, "missing")}), dir); err == nil {
		t.Error("a missing FAK_TOKEN_FILE must be an error")
	}
}
