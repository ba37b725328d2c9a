package guard

import (
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// runHook runs the hook and checks the fail-open contract: exit 0, and
// stderr either empty (wantFail "") or one line of at most 200 bytes
// containing wantFail.
func runHook(t *testing.T, event string, args []string, stdin io.Reader, env map[string]string, wantFail string) {
	t.Helper()
	var stderr bytes.Buffer
	if code := RunHook(event, args, stdin, &stderr, envOf(env)); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	out := stderr.String()
	if wantFail == "" {
		if out != "" {
			t.Fatalf("stderr = %q, want nothing", out)
		}
		return
	}
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("stderr = %q, want exactly one line", out)
	}
	if len(out) > maxStderrLine {
		t.Fatalf("stderr line is %d bytes, over %d: %q", len(out), maxStderrLine, out)
	}
	if !strings.Contains(out, wantFail) || !strings.Contains(out, "fail-open") {
		t.Fatalf("stderr = %q, want it to mention %q and fail-open", out, wantFail)
	}
}

func TestHookSuccessIsSilent(t *testing.T) {
	rec := &recorder{reply: Reply{OK: true, Action: "clear", SessionID: "ses_b"}}
	_, path := startServer(t, "tok", rec.handle)
	env := map[string]string{EnvSocket: path, EnvToken: "tok"}
	runHook(t, EventSessionStart, []string{"--provider", "claude"}, strings.NewReader(claudeClear+"\n"), env, "")
	runHook(t, EventSessionEnd, []string{"--provider", "gemini"}, strings.NewReader(geminiEnd), env, "")
	if rec.count() != 2 {
		t.Fatalf("%d requests reached the guard, want 2", rec.count())
	}
	if r := rec.reqs[0]; r.Event != EventSessionStart || r.Provider != "claude" || r.Token != "tok" {
		t.Fatalf("first request %+v", r)
	}
	if r := rec.reqs[1]; r.Event != EventSessionEnd || r.Provider != "gemini" {
		t.Fatalf("second request %+v", r)
	}
}

func TestHookFailsOpen(t *testing.T) {
	rec := &recorder{reply: Reply{OK: true}}
	_, path := startServer(t, "tok", func(ctx context.Context, req Request) Reply {
		// A guard that checks the payload, as the real one does.
		if _, err := ParseHook(req.Event, req.Payload); err != nil {
			return Reply{Error: err.Error()}
		}
		return rec.handle(ctx, req)
	})
	good := map[string]string{EnvSocket: path, EnvToken: "tok"}
	for _, tc := range []struct {
		name     string
		env      map[string]string
		args     []string
		stdin    string
		wantFail string
	}{
		{"not under a guard", map[string]string{}, nil, claudeClear, "FAK_GUARD_SOCKET is unset"},
		{"socket missing", map[string]string{EnvSocket: filepath.Join(shortDir(t), "gone.sock"), EnvToken: "tok"}, nil, claudeClear, "guard unreachable"},
		{"wrong token", map[string]string{EnvSocket: path, EnvToken: "nope"}, nil, claudeClear, "wrong guard token"},
		{"malformed JSON", good, nil, `{"source":"clear",`, "malformed hook JSON"},
		{"unknown source", good, nil, `{"source":"rewind","session_id":"S"}`, "unknown SessionStart source"},
		{"no session id", good, nil, `{"source":"clear"}`, "none of session_id"},
		{"bad flag", good, []string{"--nope"}, claudeClear, "flag provided but not defined"},
		{"huge error text", good, nil, `{"source":"` + strings.Repeat("z", 5000) + `","session_id":"S"}`, "unknown SessionStart source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runHook(t, EventSessionStart, tc.args, strings.NewReader(tc.stdin), tc.env, tc.wantFail)
		})
	}
	if rec.count() != 0 {
		t.Fatalf("%d failing hooks reached the cluster side", rec.count())
	}
}

// A guard that accepts and never answers, and a provider that never closes
// stdin: the hook gives up after hookTimeout.
func TestHookTimesOut(t *testing.T) {
	defer func(d time.Duration) { hookTimeout = d }(hookTimeout)
	hookTimeout = 300 * time.Millisecond

	path := filepath.Join(shortDir(t), "mute.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	env := map[string]string{EnvSocket: path, EnvToken: "tok"}
	t.Run("silent guard", func(t *testing.T) {
		runHook(t, EventSessionStart, []string{"--provider", "codex"}, strings.NewReader(codexStartup), env, "no answer within")
	})
	t.Run("budget from the environment", func(t *testing.T) {
		env := map[string]string{EnvSocket: path, EnvToken: "tok", EnvHookTimeout: "250ms"}
		runHook(t, EventSessionStart, nil, strings.NewReader(codexStartup), env, "no answer within 250ms")
	})
	t.Run("stdin never closed", func(t *testing.T) {
		pr, pw := io.Pipe()
		defer pw.Close()
		runHook(t, EventSessionStart, nil, pr, env, "no answer within")
	})
}
