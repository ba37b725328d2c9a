package node_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// nodeGoroutines lists the goroutines running code of package node or its
// runner (tests and the test harness excluded, and the one goroutine that
// forks turn processes, which lives as long as the process by design).
func nodeGoroutines() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "proc.startFromLockedThread") {
			continue
		}
		if strings.Contains(g, "fak-dev/fak/node.") || strings.Contains(g, "fak-dev/fak/node/runner") {
			out = append(out, g)
		}
	}
	return out
}

// Shutting a fleet down while a runner is inside a turn (waiting for an
// approval) and the reapers are ticking leaves none of their goroutines.
func TestCluster_ShutdownLeavesNoRunnerOrReaperGoroutines(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{EchoTurn: 50 * time.Millisecond})
	f := c.Followers()[0]
	id := createSession(t, c, f, "shutdown")
	term := attach(t, c, f, id, "terminal", "term")
	if err := takeLease(ctxT(t, 15*time.Second), c, f, id, term, false); err != nil {
		t.Fatal(err)
	}
	tool := mustAct(t, c, f, id, term, "!tool wait")
	waitJournal(t, c, f, id, "the turn to wait for approval", func(evs []*fakv1.Event) bool {
		return count(after(evs, tool), "approval.requested") == 1
	})
	c.StopAll()
	// Shutdown waits for the runner and the reaper; only the join retry
	// loop may take a moment to see the node is done.
	deadline := time.Now().Add(10 * time.Second)
	for left := nodeGoroutines(); len(left) > 0; left = nodeGoroutines() {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines of the node outlived its shutdown:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
