package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/echo"
	"github.com/fak-dev/fak/node/workspace"
)

// storeSource serves a workspace store as another node would, optionally
// altering what it sends.
type storeSource struct {
	s      *workspace.Store
	tamper bool
}

func (x storeSource) Manifest(_ context.Context, digest string) ([]byte, error) {
	return x.s.ManifestBytes(digest)
}

func (x storeSource) Chunks(_ context.Context, hashes []string, put func(string, []byte) error) error {
	for _, h := range hashes {
		b, err := x.s.Get(h)
		if err != nil {
			return err
		}
		if x.tamper {
			b = append([]byte("altered "), b...)
		}
		if err := put(h, b); err != nil {
			return err
		}
	}
	return nil
}

// checkpointWorkspace snapshots dir into the source store and commits the
// move's checkpoint with it, as a source runner does.
func (l *local) checkpointWorkspace(id, moveID string, src *workspace.Store, dir string) *fsmpb.Workspace {
	l.t.Helper()
	m, err := workspace.Snapshot(dir, src, 0)
	if err != nil {
		l.t.Fatal(err)
	}
	d, err := src.PutManifest(m)
	if err != nil {
		l.t.Fatal(err)
	}
	ws := &fsmpb.Workspace{Digest: d, Bytes: uint64(m.Bytes()), Chunks: uint32(len(m.Chunks()))}
	s, _ := l.f.Session(id)
	l.must(&fsmpb.Command{Body: &fsmpb.Command_MoveCheckpoint{MoveCheckpoint: &fsmpb.MoveCheckpoint{
		SessionId: id, MoveId: moveID, SourceEpoch: s.Epoch, CheckpointSeq: s.HeadSeq,
		Digest: fsm.JournalDigest(l.journal(id)), Workspace: ws}}})
	return ws
}

// sourceWorkspace requests move moveID of session id to n1 and commits
// its checkpoint with a workspace holding one file, as the source does.
func (l *local) sourceWorkspace(id, moveID, name, content string) (*workspace.Store, *fsmpb.Workspace) {
	l.t.Helper()
	dir := l.t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o640); err != nil {
		l.t.Fatal(err)
	}
	src, err := workspace.OpenStore(l.t.TempDir())
	if err != nil {
		l.t.Fatal(err)
	}
	l.requestMove(id, moveID, "n1")
	return src, l.checkpointWorkspace(id, moveID, src, dir)
}

// destination runs the runner of n1 with a workspace store, whose sources
// are src.
func (l *local) destination(src runner.WorkspaceSource) (root string, store *workspace.Store) {
	return l.destinationWith(src, nil)
}

// destinationWith is destination, calling before with the workspace root
// before the runner starts.
func (l *local) destinationWith(src runner.WorkspaceSource, before func(root string)) (root string, store *workspace.Store) {
	l.t.Helper()
	dir := l.t.TempDir()
	store, err := workspace.OpenStore(filepath.Join(dir, "store"))
	if err != nil {
		l.t.Fatal(err)
	}
	root = filepath.Join(dir, "workspaces")
	if before != nil {
		before(root)
	}
	r := runner.New(runner.Config{Node: "n1", FSM: l.f, Writer: l, Adapters: []runner.Adapter{echo.New(echo.Options{})},
		Logger: hclog.NewNullLogger(), WorkspaceRoot: root, Workspaces: store,
		Sources: func(string) (runner.WorkspaceSource, error) { return src, nil }})
	r.Start()
	l.t.Cleanup(r.Stop)
	return root, store
}

// The destination restores the workspace the checkpoint committed before
// RESTORED; chunks sent altered fail the move with
// WORKSPACE_DIGEST_MISMATCH and the source epoch stays current.
func TestRunner_DestinationRestoresTheWorkspace(t *testing.T) {
	for _, tamper := range []bool{false, true} {
		l := newLocal(t)
		id := l.session("s1", "n0", "echo")
		src, ws := l.sourceWorkspace(id, "m1", "notes.txt", "remember the milk\n")
		root, store := l.destination(storeSource{s: src, tamper: tamper})
		l.admit(id, "m1", "n1")
		if !tamper {
			l.waitSession(id, "the restore", moveState(fsm.MoveRestored))
			b, err := os.ReadFile(filepath.Join(root, id, "notes.txt"))
			if err != nil || string(b) != "remember the milk\n" {
				t.Fatalf("the destination's workspace holds %q (%v)", b, err)
			}
			if store.Missing(&workspace.Manifest{}) != nil || !strings.HasPrefix(ws.Digest, "sha256:") {
				t.Fatalf("workspace %v", ws)
			}
			continue
		}
		s := l.waitSession(id, "the failed move", moveState(fsm.MoveFailed))
		if !strings.HasPrefix(s.Move.Reason, string(fsm.ReasonWorkspaceDigestMismatch)) || s.Epoch != 1 {
			t.Fatalf("move %s: %q (epoch %d), want WORKSPACE_DIGEST_MISMATCH with epoch 1", s.Move.State, s.Move.Reason, s.Epoch)
		}
		if _, err := os.Stat(filepath.Join(root, id, "notes.txt")); err == nil {
			t.Fatal("altered chunks were materialized")
		}
	}
}

// flakySource breaks the first fetch after `after` chunks, as a stream cut
// by the network would, and counts what it sent.
type flakySource struct {
	storeSource
	mu    sync.Mutex
	after int
	sent  []string
}

func (x *flakySource) Chunks(ctx context.Context, hashes []string, put func(string, []byte) error) error {
	return x.storeSource.Chunks(ctx, hashes, func(h string, b []byte) error {
		x.mu.Lock()
		if x.after == 0 {
			x.after = -1
			x.mu.Unlock()
			return runner.Transient(errors.New("connection reset by peer"))
		}
		x.after--
		x.sent = append(x.sent, h)
		x.mu.Unlock()
		return put(h, b)
	})
}

// A transfer broken midway resumes: the chunks stored before the break
// are kept and the next pass asks only for the rest, so every chunk
// crosses once.
func TestRunner_BrokenWorkspaceTransferResumes(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n0", "echo")
	srcDir := t.TempDir()
	for i := 0; i < 6; i++ {
		if err := os.WriteFile(filepath.Join(srcDir, fmt.Sprintf("f%d", i)), []byte(strings.Repeat(fmt.Sprint(i), 1000)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src, err := workspace.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l.requestMove(id, "m1", "n1")
	l.checkpointWorkspace(id, "m1", src, srcDir)
	fs := &flakySource{storeSource: storeSource{s: src}, after: 3}
	root, _ := l.destination(fs)
	l.admit(id, "m1", "n1")
	l.waitSession(id, "the restore after the break", moveState(fsm.MoveRestored))
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.sent) != 6 || len(slices.Compact(slices.Sorted(slices.Values(fs.sent)))) != 6 {
		t.Fatalf("chunks sent %v: want each of the 6 once, across the break", fs.sent)
	}
	if b, err := os.ReadFile(filepath.Join(root, id, "f5")); err != nil || !strings.HasPrefix(string(b), "555") {
		t.Fatalf("f5 after the resumed transfer: %q %v", b, err)
	}
}

// A runner whose replica is behind — a restarted node replaying its log
// still sees a move admitted to it that the cluster has long cut over —
// takes a read barrier before restoring: it must not put the move's
// checkpointed tree back over the workspace the session has used since.
func TestRunner_RestoreReadsTheClusterFirst(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n0", "echo")
	src, ws := l.sourceWorkspace(id, "m1", "checkpointed.txt", "as of the move\n")
	l.admit(id, "m1", "n1")
	// What the cluster committed since, unseen by this replica: the
	// restore and the cutover. The workspace on n1 moved on meanwhile.
	l.onSync = func() {
		s, _ := l.f.Session(id)
		l.must(&fsmpb.Command{Body: &fsmpb.Command_MoveRestore{MoveRestore: &fsmpb.MoveRestore{
			SessionId: id, MoveId: "m1", NewEpoch: 2, Digest: s.Move.Digest}}})
		l.must(&fsmpb.Command{Body: &fsmpb.Command_MoveCutover{MoveCutover: &fsmpb.MoveCutover{SessionId: id, MoveId: "m1"}}})
	}
	var live string
	root, _ := l.destinationWith(storeSource{s: src}, func(root string) {
		live = filepath.Join(root, id, "later.txt")
		if err := os.MkdirAll(filepath.Dir(live), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(live, []byte("written after the cutover\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	l.waitSession(id, "the cutover the cluster had", moveState(fsm.MoveCutoverCommitted))
	l.inputAt(id, 2, "after")
	l.waitSession(id, "a turn on n1", turnsDone(1))
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("the live workspace was replaced by move m1's checkpoint %s: %v", ws.Digest, err)
	}
	if _, err := os.Stat(filepath.Join(root, id, "checkpointed.txt")); err == nil {
		t.Fatal("the checkpointed tree was materialized over the live one")
	}
}
