package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// TestFleetAgainstARealFleet: fakctl fleet prints the three nodes and the
// sessions as tables and as JSON, pages through every session, and --watch
// draws frames until its context is cancelled.
func TestFleetAgainstARealFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an in-process fleet; skipped with -short")
	}
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testcluster.Token)
	fleet := testcluster.New(t, testcluster.Options{Nodes: 3})
	addr := fleet.Followers()[0].APIAddr
	leader := fleet.Leader().Name

	var ids []string
	for _, title := range []string{"alpha", "beta", "gamma"} {
		code, out, errOut := runCLI(t, addr, "session", "create", "--title", title, "--node", "n2", "--max-turns", "5")
		if code != exitOK {
			t.Fatalf("create: code %d stderr %q", code, errOut)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	if code, _, errOut := runCLI(t, addr, "session", "stop", ids[2]); code != exitOK {
		t.Fatalf("stop: code %d stderr %q", code, errOut)
	}

	code, out, errOut := runCLI(t, addr, "fleet")
	if code != exitOK || errOut != "" {
		t.Fatalf("fleet: code %d stderr %q", code, errOut)
	}
	for _, want := range []string{
		"Leader " + leader + "; 3 nodes (3 alive); sessions: 2 active, 1 stopped, 0 purged; moves open: 0",
		"NODES\nNAME ", "ROLE", "LAG", "SESSIONS\nID ", "BUDGET",
		ids[0], ids[1], "alpha", "beta", "turns 5",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("fleet output lacks %q:\n%s", want, out)
		}
	}
	for _, n := range fleet.Nodes {
		role := "follower"
		if n.Name == leader {
			role = "leader"
		}
		if !strings.Contains(out, "\n"+n.Name+" ") || !strings.Contains(out, role) {
			t.Errorf("fleet output lacks node %s (%s):\n%s", n.Name, role, out)
		}
	}
	if strings.Contains(out, ids[2]) {
		t.Errorf("the stopped session is listed without --all:\n%s", out)
	}

	// Pages of one, stopped included: every session, each once.
	code, out, errOut = runCLI(t, addr, "fleet", "--all", "--limit", "1", "--stale")
	if code != exitOK {
		t.Fatalf("fleet --all --limit 1: code %d stderr %q", code, errOut)
	}
	for _, id := range ids {
		if strings.Count(out, id) != 1 {
			t.Errorf("fleet --all --limit 1 shows %s %d times:\n%s", id, strings.Count(out, id), out)
		}
	}

	code, out, errOut = runCLI(t, addr, "-o", "json", "fleet", "--all")
	var ov fakv1.OverviewResponse
	if code != exitOK {
		t.Fatalf("fleet -o json: code %d stderr %q", code, errOut)
	}
	if err := protojson.Unmarshal([]byte(out), &ov); err != nil {
		t.Fatalf("fleet -o json is not an OverviewResponse: %v\n%s", err, out)
	}
	if len(ov.Nodes) != 3 || len(ov.Sessions) != 3 || ov.Leader != leader || ov.SessionsActive != 2 {
		t.Errorf("fleet -o json: %d nodes, %d sessions, leader %q, %d active", len(ov.Nodes), len(ov.Sessions), ov.Leader, ov.SessionsActive)
	}
	if ov.Nodes[1].Name != "n2" || ov.Nodes[1].SessionsHosted != 2 {
		t.Errorf("fleet -o json: n2 = %v, want 2 sessions hosted", ov.Nodes[1])
	}

	// --watch on a non-terminal prints frames separated by a blank line,
	// and a cancelled context ends it cleanly.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newLineWriter()
	done := make(chan int, 1)
	var watchErr string
	go func() {
		code, _, errOut := runCLIContext(ctx, addr, w, "fleet", "--watch", "--interval", "50ms")
		watchErr = errOut
		done <- code
	}()
	deadline := time.After(30 * time.Second)
	for strings.Count(w.String(), "fak fleet via ") < 2 {
		select {
		case <-w.written:
		case <-deadline:
			t.Fatalf("no second frame; output:\n%s", w.String())
		}
	}
	cancel()
	if code := <-done; code != exitOK || watchErr != "" {
		t.Fatalf("watch: code %d stderr %q", code, watchErr)
	}
	frames := w.String()
	if strings.Contains(frames, clearScreen) || !strings.Contains(frames, "\n\nfak fleet via ") || strings.Count(frames, ids[0]) < 2 {
		t.Errorf("watch frames:\n%s", frames)
	}
}

// TestFleetIsANounCommand: "fakctl fleet" runs without a verb, is listed in
// the usage, and has help of its own.
func TestFleetIsANounCommand(t *testing.T) {
	isolateEnv(t)
	code, out, _ := runCLI(t, "127.0.0.1:1", "help")
	if code != exitOK || !strings.Contains(out, "\nFleet commands:\n    fleet ") {
		t.Errorf("usage does not list fleet:\n%s", out)
	}
	for _, args := range [][]string{{"help", "fleet"}, {"fleet", "help"}, {"fleet", "-h"}} {
		code, out, errOut := runCLI(t, "127.0.0.1:1", args...)
		if code != exitOK || !strings.Contains(out, "Usage: fakctl fleet [--stale]") || !strings.Contains(out, "--interval") {
			t.Errorf("%v: code %d stderr %q stdout:\n%s", args, code, errOut, out)
		}
	}
	code, _, errOut := runCLI(t, "127.0.0.1:1", "fleet", "extra")
	if code != exitUsage || !strings.Contains(errOut, `unexpected argument "extra"`) {
		t.Errorf("fleet extra: code %d stderr %q", code, errOut)
	}
}
