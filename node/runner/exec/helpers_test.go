package exec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

// patience bounds every wait of these tests: far above what a turn takes,
// so only a hang reaches it.
const patience = 20 * time.Second

const testSession = "ses_test"

// testdata is the absolute path of an agent in testdata/ (a turn runs in
// its workspace, not here).
func testdata(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// example is the absolute path of an agent in examples/agents/.
func example(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "..", "examples", "agents", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// start validates o (protocol text unless set) and starts a runtime for an
// epoch of testSession in a fresh workspace, reading j.
func start(t *testing.T, o Options, j runner.Journal, resetSeq uint64) (*runtime, string) {
	t.Helper()
	if o.Name == "" {
		o.Name = "test-agent"
	}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(t.TempDir(), "workspaces", testSession)
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	ep := runner.Epoch{SessionID: testSession, Epoch: 3, ResetSeq: resetSeq, Workspace: ws, Addr: "127.0.0.1:7070"}
	rt, err := a.Start(context.Background(), ep, j)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Stop() })
	return rt.(*runtime), ws
}

func inputEvent(seq uint64, text string) *fsmpb.Event {
	return &fsmpb.Event{SessionId: testSession, Seq: seq, Kind: fsm.KindInput, Text: text}
}

// turnResult is what a Turn returned.
type turnResult struct {
	res runner.TurnResult
	err error
}

// goTurn runs a turn in the background; the channel yields its result.
func goTurn(ctx context.Context, rt runner.Runtime, in *fsmpb.Event, tr runner.Turn) <-chan turnResult {
	ch := make(chan turnResult, 1)
	go func() {
		res, err := runnertest.Run(ctx, rt, in, tr)
		ch <- turnResult{res, err}
	}()
	return ch
}

// runTurn runs a turn to its end, failing the test if it hangs.
func runTurn(t *testing.T, rt runner.Runtime, in *fsmpb.Event, tr runner.Turn) (runner.TurnResult, error) {
	t.Helper()
	select {
	case r := <-goTurn(context.Background(), rt, in, tr):
		return r.res, r.err
	case <-time.After(patience):
		t.Fatal("the turn did not end")
		return runner.TurnResult{}, nil
	}
}

// awaitTurn waits for a turn started with goTurn, failing if it hangs.
func awaitTurn(t *testing.T, ch <-chan turnResult, within time.Duration) turnResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(within):
		t.Fatalf("the turn did not end within %s", within)
		return turnResult{}
	}
}

// waitFor polls cond until it holds; past patience the test fails.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wantReason fails unless err is a TurnError with reason whose message
// holds every part.
func wantReason(t *testing.T, err error, reason string, parts ...string) {
	t.Helper()
	var te *runner.TurnError
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T), want a %s TurnError", err, err, reason)
	}
	if te.Reason != reason {
		t.Fatalf("reason %s (%v), want %s", te.Reason, err, reason)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not say %q", err, p)
		}
	}
}

// readPids reads the pids an agent recorded in path, waiting for the file.
func readPids(t *testing.T, path string) []int {
	t.Helper()
	var b []byte
	waitFor(t, path, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil
	})
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		t.Fatalf("%s holds no pids", path)
	}
	return pids
}

// gone reports whether pid has exited: no such process, or a zombie
// waiting for init to reap it.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command, which is in parentheses and may hold
	// spaces: "pid (comm) S ...".
	s := string(b)
	rest := s[strings.LastIndexByte(s, ')')+1:]
	f := strings.Fields(rest)
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// wantAllDead fails unless every pid is gone within a short deadline: a
// SIGKILLed process takes a moment to finish exiting, never longer.
func wantAllDead(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for !gone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d of the turn's group outlived the turn", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// approvalTurn is a fake Turn whose AwaitApproval blocks until the turn is
// cancelled, telling the test once it is waiting.
type approvalTurn struct {
	*runnertest.Turn
	waiting chan uint64
}

func (a *approvalTurn) AwaitApproval(ctx context.Context, seq uint64) (bool, error) {
	select {
	case a.waiting <- seq:
	default:
	}
	<-ctx.Done()
	return false, ctx.Err()
}

// kinds lists the kinds of events.
func kinds(evs []runner.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

func newOutput(tr runner.Turn) *runner.Output { return runner.NewOutput(context.Background(), tr) }
