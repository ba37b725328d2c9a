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
// reads them there, and the move journaled what it carried and what that
// cost. Chunks altered in the source's store fail a move
// (WORKSPACE_DIGEST_MISMATCH) and the source serves on; the next move goes
// through; back on n1 only what n1 lacks crosses. A workspace holding a
// fifo is refused.
func TestWorkspaceMovesWithTheSession(t *testing.T) {
	// Each turn appends its input to notes.txt, keeps a link to it in a
	// subdirectory, and prints what the workspace holds.
	agent := `[ -e static.txt ] || echo "written once, never changed" > static.txt; cat >> notes.txt; echo >> notes.txt; mkdir -p sub && ln -sf ../notes.txt sub/link; chmod 0640 notes.txt; echo "--"; cat sub/link`
	c := moveFleet(t, testcluster.Options{Configure: func(name string, cfg *node.Config) {
		cfg.Runtimes = append(cfg.Runtimes, node.RuntimeConfig{Name: "notes", Adapter: node.AdapterExec, Protocol: "text",
			Command: []string{"sh", "-c", agent}},
			node.RuntimeConfig{Name: "fifo", Adapter: node.AdapterExec, Protocol: "text",
				Command: []string{"sh", "-c", "cat > /dev/null; rm -f pipe; mkfifo pipe; echo made a fifo"}})
	}})
	n1, n2 := c.Node("n1"), c.Node("n2")
	id := createPlaced(t, c, n1, "notes", "n1")
	att := talk(t, c, n1, id)
	var lastInput uint64
	turn := func(epoch uint64, text string) string {
		t.Helper()
		in := actAt(t, c, n1, id, att, epoch, text)
		f, evs := completedTurn(t, c, n1, id, in)
		if f["status"] != "completed" {
			t.Fatalf("turn %q: %v\n%s", text, f, transcript(evs))
		}
		lastInput = in
		return transcript(evs)
	}
	turn(1, "alpha")
	turn(1, "beta")

	mv := moveSession(t, c, n1, id, "n2", 10*time.Second)
	if m := waitMove(t, c, id, mv.MoveId, "ended", moveEnded); m.State != fsm.MoveCutoverCommitted || m.WorkspaceDigest == "" || m.WorkspaceBytes == 0 ||
		m.WorkspaceTransfer.GetBytesSent()+m.WorkspaceTransfer.GetBytesPresent() != m.WorkspaceBytes {
		// (n2 may hold it all already: the post-turn copy went there.)
		t.Fatalf("move %+v: want cut over, carrying the workspace, every byte sent or already there", m)
	}
	out := turn(describe(t, c, n1, id).GetEpoch(), "gamma")
	if !strings.Contains(out, "alpha") || !strings.Contains(out, "beta") || !strings.Contains(out, "gamma") {
		t.Fatalf("the turn on n2 does not see the files written on n1:\n%s", out)
	}
	// The first turn after the cutover was the move's warm-up; the copy
	// n2 shipped after it sent what changed (notes.txt), not static.txt.
	if m := waitMove(t, c, id, mv.MoveId, "warmed up", func(m *fakv1.Move) bool { return m.WarmupNanos > 0 }); m.CacheLineage.GetCache() != fsm.CacheNone {
		t.Fatalf("move %+v: an exec runtime with no provider bound keeps no provider cache", m)
	}
	var cp *fakv1.WorkspaceCopy
	c.WaitFor(30*time.Second, "the copy of the turn on n2", func() bool {
		cp = describe(t, c, n1, id).GetWorkspaceCopy()
		return cp.GetAfterInput() == lastInput
	})
	if cp.Node == "n2" || cp.CopyNanos <= 0 || cp.Transfer.GetBytesPresent() == 0 || cp.Transfer.GetBytesSent() >= cp.Bytes {
		t.Fatalf("copy after the turn on n2: %+v, want another node holding it, its time, and only what changed sent", cp)
	}
	ws := filepath.Join(n2.DataDir, "workspaces", id)
	if fi, err := os.Stat(filepath.Join(ws, "notes.txt")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("notes.txt on n2: %v %v, want mode 0640 carried", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(ws, "sub", "link")); err != nil || target != "../notes.txt" {
		t.Fatalf("sub/link on n2: %q %v", target, err)
	}
	checkpointed, restored, warmed := false, false, false
	for _, ev := range readAll(t, c, n1, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE) {
		if ev.Kind == fsm.KindMoveWarmed && strings.Contains(ev.Text, "first turn after the move") {
			warmed = true
		}
		if ev.Kind == fsm.KindMoveCheckpointed && strings.Contains(ev.Text, "workspace") && strings.Contains(string(ev.Data), `"workspace":{"digest":"`) {
			checkpointed = true
		}
		if ev.Kind == fsm.KindMoveRestored && strings.Contains(ev.Text, "already there") && strings.Contains(string(ev.Data), `"transfer":{"bytes_sent":`) {
			restored = true
		}
	}
	if !checkpointed || !restored || !warmed {
		t.Fatalf("move.checkpointed says what workspace it carried: %v; move.restored what restoring it cost: %v; move.warmed the warm-up: %v",
			checkpointed, restored, warmed)
	}

	// Alter every chunk n2 (now the source) holds. Its checkpoint keeps
	// chunks already stored (they are named by their content); sending
	// them, n2 finds them altered, drops them and refuses, and the move
	// fails with WORKSPACE_DIGEST_MISMATCH: the session stays on n2 and
	// serves.
	store := filepath.Join(n2.DataDir, "workspace-store")
	altered := 0
	_ = filepath.WalkDir(store, func(p string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(store, p)
		if err == nil && !d.IsDir() && (strings.HasPrefix(rel, "chunks") || strings.HasSuffix(p, ".pack")) {
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
	if m := waitMove(t, c, id, mv.MoveId, "ended", moveEnded); m.State != fsm.MoveFailed || !strings.Contains(m.Reason, string(fsm.ReasonWorkspaceDigestMismatch)) {
		t.Fatalf("move with altered chunks: %+v, want MOVE_FAILED with WORKSPACE_DIGEST_MISMATCH", m)
	}
	if s := describe(t, c, n1, id); s.GetPlacement().GetNode() != "n2" {
		t.Fatalf("the session left n2 (%v): the source must stay authoritative", s.GetPlacement())
	}
	if out := turn(describe(t, c, n1, id).GetEpoch(), "delta"); !strings.Contains(out, "gamma") || !strings.Contains(out, "delta") {
		t.Fatalf("the source does not serve on after the failed move:\n%s", out)
	}
	// The altered chunks were dropped: the next checkpoint stores them
	// again from the workspace, and the move goes through.
	mv = moveSession(t, c, n1, id, "n3", 10*time.Second)
	if m := waitMove(t, c, id, mv.MoveId, "ended", moveEnded); m.State != fsm.MoveCutoverCommitted {
		t.Fatalf("move to n3 after the failure: %+v", m)
	}
	if out := turn(describe(t, c, n1, id).GetEpoch(), "epsilon"); !strings.Contains(out, "delta") || !strings.Contains(out, "epsilon") {
		t.Fatalf("the turn on n3 does not see the workspace:\n%s", out)
	}
	// Moving back to n1, which holds the first snapshot's chunks, works
	// from what it lacks.
	mv = moveSession(t, c, n1, id, "n1", 10*time.Second)
	if m := waitMove(t, c, id, mv.MoveId, "ended", moveEnded); m.State != fsm.MoveCutoverCommitted ||
		m.WorkspaceTransfer.GetBytesSent() >= m.WorkspaceBytes || m.WorkspaceTransfer.GetChunksPresent() == 0 {
		t.Fatalf("move back to n1: %+v, want only what n1 lacks sent (static.txt is there)", m)
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
