package node_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// A session's workspace moves with it (issue 16, part 1): an exec agent
// writes files over several turns on n1; after a move to n2 the next turn
// reads them there, and the checkpoint journaled what it carried; it goes
// on to n3 and back to n1, which replaces its old copy.
func TestWorkspaceMovesWithTheSession(t *testing.T) {
	// Each turn appends its input to notes.txt, keeps a link to it in a
	// subdirectory, and prints what the workspace holds.
	agent := `cat >> notes.txt; echo >> notes.txt; mkdir -p sub && ln -sf ../notes.txt sub/link; chmod 0640 notes.txt; echo "--"; cat sub/link`
	c := moveFleet(t, testcluster.Options{Configure: func(name string, cfg *node.Config) {
		cfg.Runtimes = append(cfg.Runtimes, node.RuntimeConfig{Name: "notes", Adapter: node.AdapterExec, Protocol: "text",
			Command: []string{"sh", "-c", agent}},
			node.RuntimeConfig{Name: "fifo", Adapter: node.AdapterExec, Protocol: "text",
				Command: []string{"sh", "-c", "cat > /dev/null; rm -f pipe; mkfifo pipe; echo made a fifo"}})
	}})
	n1, n2 := c.Node("n1"), c.Node("n2")
	id := createPlaced(t, c, n1, "notes", "n1")
	att := talk(t, c, n1, id)
	turn := func(epoch uint64, text string) string {
		t.Helper()
		in := actAt(t, c, n1, id, att, epoch, text)
		f, evs := completedTurn(t, c, n1, id, in)
		if f["status"] != "completed" {
			t.Fatalf("turn %q: %v\n%s", text, f, transcript(evs))
		}
		return transcript(evs)
	}
	turn(1, "alpha")
	turn(1, "beta")

	mv := moveSession(t, c, n1, id, "n2", 10*time.Second)
	if m := waitMove(t, c, id, mv.MoveId, "ended", moveEnded); m.State != fsm.MoveCutoverCommitted || m.WorkspaceDigest == "" || m.WorkspaceBytes == 0 {
		t.Fatalf("move %+v: want cut over, carrying the workspace", m)
	}
	out := turn(describe(t, c, n1, id).GetEpoch(), "gamma")
	if !strings.Contains(out, "alpha") || !strings.Contains(out, "beta") || !strings.Contains(out, "gamma") {
		t.Fatalf("the turn on n2 does not see the files written on n1:\n%s", out)
	}
	ws := filepath.Join(n2.DataDir, "workspaces", id)
	if fi, err := os.Stat(filepath.Join(ws, "notes.txt")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("notes.txt on n2: %v %v, want mode 0640 carried", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(ws, "sub", "link")); err != nil || target != "../notes.txt" {
		t.Fatalf("sub/link on n2: %q %v", target, err)
	}
	checkpointed := false
	for _, ev := range readAll(t, c, n1, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE) {
		if ev.Kind == fsm.KindMoveCheckpointed && strings.Contains(ev.Text, "workspace") && strings.Contains(string(ev.Data), `"workspace":{"digest":"`) {
			checkpointed = true
		}
	}
	if !checkpointed {
		t.Fatal("no move.checkpointed says what workspace it carried")
	}

	// Alter every chunk n2 (now the source) holds: its checkpoint reads
	// the workspace itself, so the next move still carries the true files
	// (a destination fed altered chunks fails the move:
	// runner.TestRunner_DestinationRestoresTheWorkspace).
	store := filepath.Join(n2.DataDir, "workspace-store", "chunks")
	altered := 0
	_ = filepath.WalkDir(store, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if werr := os.WriteFile(p, []byte("altered"), 0o600); werr == nil {
				altered++
			}
		}
		return nil
	})
	if altered == 0 {
		t.Fatalf("no chunk file under %s to alter", store)
	}
	mv = moveSession(t, c, n1, id, "n3", 10*time.Second)
	if m := waitMove(t, c, id, mv.MoveId, "ended", moveEnded); m.State != fsm.MoveCutoverCommitted {
		t.Fatalf("move to n3: %+v", m)
	}
	if out := turn(describe(t, c, n1, id).GetEpoch(), "delta"); !strings.Contains(out, "gamma") || !strings.Contains(out, "delta") {
		t.Fatalf("the turn on n3 does not see the workspace:\n%s", out)
	}
	// Moving back to n1, which holds the first snapshot's chunks, works
	// from what it lacks.
	mv = moveSession(t, c, n1, id, "n1", 10*time.Second)
	if m := waitMove(t, c, id, mv.MoveId, "ended", moveEnded); m.State != fsm.MoveCutoverCommitted {
		t.Fatalf("move back to n1: %+v", m)
	}
	if b, err := os.ReadFile(filepath.Join(n1.DataDir, "workspaces", id, "notes.txt")); err != nil || !strings.Contains(string(b), "delta") {
		t.Fatalf("n1's workspace after moving back: %q %v", b, err)
	}

	// A workspace holding what must not cross nodes (a fifo) is refused
	// by its source: the move fails, the session stays.
	bad := createPlaced(t, c, n1, "fifo", "n1")
	batt := talk(t, c, n1, bad)
	if f, _ := completedTurn(t, c, n1, bad, actAt(t, c, n1, bad, batt, 1, "go")); f["status"] != "completed" {
		t.Fatalf("fifo turn %v", f)
	}
	mv = moveSession(t, c, n1, bad, "n2", 10*time.Second)
	if m := waitMove(t, c, bad, mv.MoveId, "ended", moveEnded); m.State != fsm.MoveFailed || !strings.Contains(m.Reason, "WORKSPACE_REFUSED") || !strings.Contains(m.Reason, "pipe") {
		t.Fatalf("move of a workspace with a fifo: %+v, want MOVE_FAILED WORKSPACE_REFUSED naming it", m)
	}
	if s := describe(t, c, n1, bad); s.GetPlacement().GetNode() != "n1" {
		t.Fatalf("placement %v after the refused move", s.GetPlacement())
	}
}
