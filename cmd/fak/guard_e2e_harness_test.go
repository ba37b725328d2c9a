package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/node/testcluster"
)

// guardRun is a finished `fak guard` run.
type guardRun struct {
	code                    int
	stdout, stderr          string
	launch, session, socket string
}

// expect checks the exit code and that neither the guard, the hooks nor
// the fake provider complained.
func (r guardRun) expect(t *testing.T, code int) {
	t.Helper()
	if r.code != code || r.stderr != "" {
		t.Fatalf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// guardProc is a running `fak guard`.
type guardProc struct {
	cmd    *exec.Cmd
	lines  chan string
	mu     sync.Mutex
	stdout bytes.Buffer // under mu
	stderr bytes.Buffer
	done   chan struct{}
}

// start starts `fak guard --addr NODE --token T ARGS...` with the fakes and
// fak on PATH.
func (g *guardFleet) start(t *testing.T, env []string, args ...string) *guardProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	args = append([]string{"guard", "--addr", "http://" + g.n.APIAddr, "--token", testcluster.Token}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(g.bin, "fak"), args...)
	cmd.Dir = t.TempDir()
	// A session of its own, without a controlling terminal: signals reach
	// the guard only from the test, which the guard then forwards.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Env = append(os.Environ(), "PATH="+g.bin+string(os.PathListSeparator)+g.fakes+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FAK_GUARD_HOOK_TIMEOUT="+guardHookBudget,
		// A race-built binary otherwise sleeps 1s at exit, every hook included;
		// a race it reports lands on stderr, which the runs check.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Env = append(cmd.Env, env...)
	p := &guardProc{cmd: cmd, lines: make(chan string, 1000), done: make(chan struct{})}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.stdout.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, out)
	}()
	return p
}

// waitFor waits for a stdout line (bounded).
func (p *guardProc) waitFor(t *testing.T, line string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l := <-p.lines:
			if l == line {
				return
			}
		case <-p.done:
			t.Fatalf("the guard ended before printing %q:\n%s", line, p.info().stdout)
		case <-deadline:
			t.Fatalf("no %q from the guard within 60s", line)
		}
	}
}

func (p *guardProc) wait(t *testing.T) guardRun {
	t.Helper()
	<-p.done
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("fak guard: %v", err)
	}
	return parseGuardRun(p.cmd.ProcessState.ExitCode(), p.stdout.String(), p.stderr.String())
}

// info is what the child printed so far (launch, session, socket).
func (p *guardProc) info() guardRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	return parseGuardRun(-1, p.stdout.String(), "")
}

func parseGuardRun(code int, stdout, stderr string) guardRun {
	r := guardRun{code: code, stdout: stdout, stderr: stderr}
	// The fakes print what the guard handed them: launch=… session=… socket=…
	for _, line := range strings.Split(r.stdout, "\n") {
		if !strings.HasPrefix(line, "launch=") {
			continue
		}
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "launch":
				r.launch = v
			case "session":
				r.session = v
			case "socket":
				r.socket = v
			}
		}
		break
	}
	return r
}

func (g *guardFleet) guard(t *testing.T, env []string, args ...string) guardRun {
	t.Helper()
	return g.start(t, env, args...).wait(t)
}

func (g *guardFleet) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (g *guardFleet) lifecycle() fakv1connect.LifecycleServiceClient {
	return fakv1connect.NewLifecycleServiceClient(g.c.HTTPClient(), "http://"+g.n.APIAddr,
		connect.WithInterceptors(apiclient.Bearer(testcluster.Token)))
}

func (g *guardFleet) describeLaunch(t *testing.T, id string) *fakv1.DescribeLaunchResponse {
	t.Helper()
	resp, err := g.lifecycle().DescribeLaunch(g.ctx(t), connect.NewRequest(&fakv1.DescribeLaunchRequest{LaunchId: id}))
	if err != nil {
		t.Fatalf("describe launch %s: %v", id, err)
	}
	return resp.Msg
}

func (g *guardFleet) session(t *testing.T, id string) *fakv1.Session {
	t.Helper()
	resp, err := g.c.Sessions(g.n).DescribeSession(g.ctx(t), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	return resp.Msg.GetSession()
}

func (g *guardFleet) lineage(t *testing.T, id string) *fakv1.GetLineageResponse {
	t.Helper()
	resp, err := g.c.Sessions(g.n).GetLineage(g.ctx(t), connect.NewRequest(&fakv1.GetLineageRequest{SessionId: id}))
	if err != nil {
		t.Fatalf("lineage of %s: %v", id, err)
	}
	return resp.Msg
}

func (g *guardFleet) journal(t *testing.T, id string) []*fakv1.Event {
	t.Helper()
	resp, err := g.c.Sessions(g.n).ReadEvents(g.ctx(t), connect.NewRequest(&fakv1.ReadEventsRequest{SessionId: id, Limit: 1000}))
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	return resp.Msg.GetEvents()
}

func guardCountKind(events []*fakv1.Event, kind string) int {
	n := 0
	for _, e := range events {
		if e.GetKind() == kind {
			n++
		}
	}
	return n
}

// guardFindEvent is the first event of kind whose data or text mentions what.
func guardFindEvent(events []*fakv1.Event, kind, what string) *fakv1.Event {
	for _, e := range events {
		if e.GetKind() == kind && (strings.Contains(string(e.GetData()), what) || strings.Contains(e.GetText(), what)) {
			return e
		}
	}
	return nil
}

func guardEventList(events []*fakv1.Event) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "#%d %s %q %s\n", e.GetSeq(), e.GetKind(), e.GetText(), e.GetData())
	}
	return b.String()
}

func guardWriteJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// guardWriteFIFO writes one line to a FIFO whose reader is (about to be) open,
// without hanging the test if the reader is gone.
func guardWriteFIFO(t *testing.T, path string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- os.WriteFile(path, []byte("go\n"), 0o600) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("nobody read the FIFO within 60s")
	}
}

func guardSignalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return s.String()
}

// guardNeedTools skips without the fake providers' tools, except in CI.
func guardNeedTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is required by the fake providers: %v", tool, err)
			}
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
}

// guardBuildFak builds the fak binary into a fresh directory, with -race
// when the test runs with it (sharing the build cache of the test itself).
func guardBuildFak(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", filepath.Join(dir, "fak")}
	if guardRace {
		args = append(args, "-race")
	}
	args = append(args, "github.com/fak-dev/fak/cmd/fak")
	start := time.Now()
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("built fak in %s (race=%v)", time.Since(start).Round(time.Millisecond), guardRace)
	return dir
}
