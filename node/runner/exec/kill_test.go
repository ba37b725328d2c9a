package exec

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fak-dev/fak/node/runner/proc/proctest"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

// The turn timeout kills the whole group: the agent, its children and
// their children.
func TestTurnTimeoutKillsTheGroup(t *testing.T) {
	t.Parallel()
	rt, ws := start(t, Options{Command: []string{testdata(t, "forker.sh"), "ready"}, TurnTimeout: time.Second}, nil, 0)
	tr := &runnertest.Turn{Input: 1}
	_, err := proctest.RunTurn(t, rt, inputEvent(1, "x"), tr)
	proctest.WantReason(t, err, ReasonTurnTimeout, "timeout of 1s")
	pids := proctest.ReadPids(t, filepath.Join(ws, "pids"))
	if len(pids) != 5 {
		t.Fatalf("the agent recorded %d pids, want 5", len(pids))
	}
	proctest.WantAllDead(t, pids)
	if tr.Output() != "ready\n" {
		t.Fatalf("output before the timeout not journaled: %q", tr.Output())
	}
}

// Cancelling the turn (an interrupt, a retired epoch, shutdown) returns
// ctx's error promptly and leaves no process of the group alive.
func TestInterruptKillsTheGroup(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{ProtocolText, ProtocolJSONL} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			rt, ws := start(t, Options{
				Command:  []string{testdata(t, "forker.sh"), `{"type":"output","text":"ready"}`},
				Protocol: proto,
			}, runnertest.Journal{inputEvent(1, "x")}, 0)
			tr := &runnertest.Turn{Input: 1}
			run := proctest.Go(t, rt, inputEvent(1, "x"), tr)
			proctest.WaitFor(t, "the agent's first output", func() bool { return strings.Contains(tr.Output(), "ready") })
			pids := proctest.ReadPids(t, filepath.Join(ws, "pids"))
			run.Interrupt(t)
			proctest.WantAllDead(t, pids)
		})
	}
}

// An interrupt while the turn waits for a person's approval ends the wait
// and kills the waiting agent's group.
func TestInterruptDuringAnApproval(t *testing.T) {
	t.Parallel()
	rt, ws := start(t, Options{Command: shell(readTurn,
		`sleep 300 & echo $! > pids.tmp; echo $$ >> pids.tmp; mv pids.tmp pids`,
		`echo '{"type":"tool.call","id":"a","name":"rm","input":{"path":"/"}}'`,
		`echo '{"type":"approval.request","id":"a","text":"rm -rf /?"}'`,
		`IFS= read -r answer`,
		`echo '{"type":"output","text":"should not get here"}'`,
		`sleep 300`,
	), Protocol: ProtocolJSONL}, runnertest.Journal{inputEvent(1, "x")}, 0)
	tr := proctest.NewApprovalTurn(1)
	run := proctest.Go(t, rt, inputEvent(1, "x"), tr)
	tr.WaitForApproval(t)
	pids := proctest.ReadPids(t, filepath.Join(ws, "pids"))
	run.Interrupt(t)
	proctest.WantAllDead(t, pids)
	if strings.Contains(tr.Output(), "should not get here") {
		t.Fatal("the agent went on after the interrupt")
	}
}

// A timeout while waiting for a person is the turn timeout too.
func TestTurnTimeoutCoversApprovalWaits(t *testing.T) {
	t.Parallel()
	rt, _ := start(t, Options{Command: shell(readTurn,
		`echo '{"type":"tool.call","id":"a","name":"x"}'`,
		`echo '{"type":"approval.request","id":"a","text":"x?"}'`,
		`IFS= read -r answer`,
	), Protocol: ProtocolJSONL, TurnTimeout: 300 * time.Millisecond}, runnertest.Journal{inputEvent(1, "x")}, 0)
	_, err := proctest.RunTurn(t, rt, inputEvent(1, "x"), proctest.NewApprovalTurn(1))
	proctest.WantReason(t, err, ReasonTurnTimeout)
}
