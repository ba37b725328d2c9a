package proc

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fak-dev/fak/node/runner/runnertest"
)

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// A background child of the process dies when the process ends.
func TestWaitKillsTheGroup(t *testing.T) {
	dir := t.TempDir()
	p, err := Command(context.Background(), Spec{Argv: []string{"sh", "-c", "sleep 30 & echo $!"}, Dir: dir, Env: Env()})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p.Cmd.Stdout = &out
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("child pid %q", out.String())
	}
	waitDead(t, pid)
}

// Cancelling the context kills the process and its children.
func TestCancelKillsTheGroup(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Command(ctx, Spec{Argv: []string{"sh", "-c", "sleep 30 & echo $! > child; wait"}, Dir: dir, Env: Env()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	pid := readPid(t, filepath.Join(dir, "child"))
	cancel()
	_ = p.Wait()
	waitDead(t, p.Pid())
	waitDead(t, pid)
}

func TestEnvIsClean(t *testing.T) {
	t.Setenv("FAK_TOKEN", "secret")
	t.Setenv("OPENAI_API_KEY", "sk-node")
	for _, kv := range Env("FAK_SESSION_ID=s1") {
		if strings.HasPrefix(kv, "FAK_TOKEN=") || strings.HasPrefix(kv, "OPENAI_API_KEY=") {
			t.Fatalf("env leaks %s", kv)
		}
	}
}

// Inside bwrap the workspace is writable, everything else is not, and
// hidden paths are empty. The same probe without the sandbox reads and
// writes them all, so each check can fail.
func TestBwrapConfines(t *testing.T) {
	runnertest.NeedTool(t, "bwrap", "bubblewrap")
	sec := runnertest.NewSecrets(t)
	ws := sec.Workspace(t, "ses_1")
	script := `echo ok > inside.txt && echo inside-ok
cat ` + sec.Tokens + ` && echo READ-TOKENS
cat ` + filepath.Join(sec.Data, "fsm.db") + ` && echo READ-DATA
echo x > ` + filepath.Join(sec.Outside, "x") + ` && echo WROTE-OUTSIDE
true`
	run := func(sandbox string) string {
		p, err := Command(context.Background(), Spec{Argv: []string{"sh", "-c", script}, Dir: ws, Env: Env(),
			Sandbox: sandbox, Hide: []string{sec.Data, sec.Tokens}})
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		p.Cmd.Stdout, p.Cmd.Stderr = &out, &errOut
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(); err != nil {
			t.Fatalf("%v: %s", err, errOut.String())
		}
		return out.String()
	}
	leaks := []string{runnertest.SecretToken, "READ-TOKENS", "node-state", "READ-DATA", "WROTE-OUTSIDE"}
	if got := run(SandboxNone); !strings.Contains(got, "READ-TOKENS") || !strings.Contains(got, "READ-DATA") || !strings.Contains(got, "WROTE-OUTSIDE") {
		t.Fatalf("unsandboxed, the probe reaches what the sandbox must hide: %q", got)
	}
	if err := os.Remove(filepath.Join(sec.Outside, "x")); err != nil {
		t.Fatal(err)
	}
	got := run(SandboxBwrap)
	if !strings.Contains(got, "inside-ok") {
		t.Fatalf("could not write its workspace: %q", got)
	}
	for _, bad := range leaks {
		if strings.Contains(got, bad) {
			t.Fatalf("sandbox leaked %q: %q", bad, got)
		}
	}
	if _, err := os.Stat(filepath.Join(sec.Outside, "x")); err == nil {
		t.Fatal("sandboxed process wrote outside its workspace")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "inside.txt")); err != nil || string(b) != "ok\n" {
		t.Fatalf("workspace file: %q %v", b, err)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no pid in %s", path)
	return 0
}

// waitDead waits until pid is gone (a zombie reaped by init counts as
// gone once kill(0) fails).
func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) && !zombie(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d survived its group", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] == "Z"
}
