package provider

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fak-dev/fak/node/runner/runnertest"
)

// Cancelling the turn (an interrupt, a retired epoch, shutdown) returns
// ctx's error promptly and leaves no process of the CLI's group alive.
func TestInterruptKillsTheCLI(t *testing.T) {
	eachKind(t, func(t *testing.T, k kindCase) {
		f := newFixture(t)
		rt, ws := f.start(Options{Kind: k.kind}, history(1, "sleep"), nil)
		tr := &runnertest.Turn{Input: 1}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := goTurn(ctx, rt, inputEvent(1, "sleep"), tr)
		pids := readPids(t, filepath.Join(ws, "pids"))
		cancel()
		r := awaitTurn(t, done, promptly)
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", r.err)
		}
		wantAllDead(t, pids)
	})
}

// The turn timeout kills the CLI's group too.
func TestTurnTimeoutKillsTheCLI(t *testing.T) {
	eachKind(t, func(t *testing.T, k kindCase) {
		f := newFixture(t)
		rt, ws := f.start(Options{Kind: k.kind, TurnTimeout: 500 * time.Millisecond}, history(1, "sleep"), nil)
		tr := &runnertest.Turn{Input: 1}
		r := awaitTurn(t, goTurn(context.Background(), rt, inputEvent(1, "sleep"), tr), promptly)
		wantReason(t, r.err, ReasonTurnTimeout, "timeout of 500ms")
		wantAllDead(t, readPids(t, filepath.Join(ws, "pids")))
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
	tr := &approvalTurn{Turn: &runnertest.Turn{Input: 1}, waiting: make(chan uint64, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := goTurn(ctx, rt, inputEvent(1, "use-tool"), tr)
	select {
	case <-tr.waiting:
	case <-time.After(patience):
		t.Fatal("the turn never waited for the approval")
	}
	cancel()
	r := awaitTurn(t, done, promptly)
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", r.err)
	}
	if strings.Contains(tr.Output(), "two files") || f.last().has("answer ") {
		t.Fatal("claude went on after the interrupt")
	}
}
