package exec

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
)

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

// kinds lists the kinds of events.
func kinds(evs []runner.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

func newOutput(tr runner.Turn) *runner.Output { return runner.NewOutput(context.Background(), tr) }
