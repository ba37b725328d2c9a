package provider

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fak-dev/fak/node/runner/proc/proctest"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

// Cancelling the turn (an interrupt, a retired epoch, shutdown) returns
// ctx's error promptly and leaves no process of the CLI's group alive.
func TestInterruptKillsTheCLI(t *testing.T) {
	eachKind(t, func(t *testing.T, k kindCase) {
		f := newFixture(t)
		rt, ws := f.start(Options{Kind: k.kind}, history(1, "sleep"), nil)
		run := proctest.Go(t, rt, inputEvent(1, "sleep"), &runnertest.Turn{Input: 1})
		pids := proctest.ReadPids(t, filepath.Join(ws, "pids"))
		run.Interrupt(t)
		proctest.WantAllDead(t, pids)
	})
}

// The turn timeout kills the CLI's group too.
func TestTurnTimeoutKillsTheCLI(t *testing.T) {
	eachKind(t, func(t *testing.T, k kindCase) {
		f := newFixture(t)
		rt, ws := f.start(Options{Kind: k.kind, TurnTimeout: 500 * time.Millisecond}, history(1, "sleep"), nil)
		tr := &runnertest.Turn{Input: 1}
		r := proctest.Go(t, rt, inputEvent(1, "sleep"), tr).Await(t, proctest.Promptly)
		proctest.WantReason(t, r.Err, ReasonTurnTimeout, "timeout of 500ms")
		proctest.WantAllDead(t, proctest.ReadPids(t, filepath.Join(ws, "pids")))
		if !strings.Contains(tr.Output(), "ready") {
			t.Fatalf("output before the timeout not journaled: %q", tr.Output())
		}
	})
}

// An interrupt while claude waits for a person's approval ends the wait
// and kills claude.
func TestInterruptDuringAClaudeApproval(t *testing.T) {
	f := newFixture(t)
	rt, _ := f.start(Options{Kind: ProviderClaude}, history(1, "use-tool"), nil)
	tr := proctest.NewApprovalTurn(1)
	run := proctest.Go(t, rt, inputEvent(1, "use-tool"), tr)
	tr.WaitForApproval(t)
	run.Interrupt(t)
	if strings.Contains(tr.Output(), "two files") || f.last().has("answer ") {
		t.Fatal("claude went on after the interrupt")
	}
}
