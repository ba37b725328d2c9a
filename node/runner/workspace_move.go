package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/workspace"
)

// Workspaces move with their session (DESIGN.md §8): at the safe point the
// source snapshots the session's workspace into its store — a manifest of
// content-addressed chunks — and the checkpoint commits the manifest's
// digest; before RESTORED the destination reads the manifest and the
// chunks its own store lacks from the source, verifying each, then
// materializes the workspace and checks the whole. A mismatch fails the
// move (WORKSPACE_DIGEST_MISMATCH), hostile content is refused on both
// ends (WORKSPACE_REFUSED), and the source stays authoritative either way.
// Chunks fetched survive a broken transfer: the next pass asks only for
// what is still missing, and a later move sends none the destination
// already holds.

// WorkspaceSource is another node's workspace store, as a destination
// reads it.
type WorkspaceSource interface {
	Manifest(ctx context.Context, digest string) ([]byte, error)
	// Chunks streams the chunks asked for to put, in order.
	Chunks(ctx context.Context, hashes []string, put func(hash string, data []byte) error) error
}

// ReasonWorkspaceRefused: a workspace holding what must not cross nodes
// (a device, a link out of it, more than max_workspace_bytes).
const ReasonWorkspaceRefused = "WORKSPACE_REFUSED"

// fetchBatch is how many chunks one fetch asks for (1 MiB each at most);
// fetchStreams how many fetches run at once, so that the source reading
// and verifying chunks, the wire, and this store verifying and writing
// them overlap.
const (
	fetchBatch   = 64
	fetchStreams = 3
)

// movesWorkspaces: this runner carries workspaces through moves.
func (r *Runner) movesWorkspaces() bool {
	return r.cfg.Workspaces != nil && r.cfg.Sources != nil && r.cfg.WorkspaceRoot != ""
}

// snapshotWorkspace snapshots s's workspace for its checkpoint; a refusal
// is returned as a moveRefusal (the move fails with it).
func (r *Runner) snapshotWorkspace(s *fsmpb.Session) (*fsmpb.Workspace, error) {
	start := time.Now()
	dir, err := Workspace(r.cfg.WorkspaceRoot, s.SessionId)
	if err != nil {
		return nil, err
	}
	m, err := workspace.Snapshot(dir, r.cfg.Workspaces, r.cfg.MaxWorkspaceBytes)
	if err != nil {
		var ref *workspace.Refusal
		if errors.As(err, &ref) {
			return nil, moveRefusal(fmt.Sprintf("%s: the workspace on %s: %v", ReasonWorkspaceRefused, r.cfg.Node, err))
		}
		return nil, err
	}
	// Snapshot stored the manifest under its digest.
	return &fsmpb.Workspace{Digest: m.Digest(), Bytes: uint64(m.Bytes()), Chunks: uint32(len(m.Chunks())),
		SnapshotNanos: time.Since(start).Nanoseconds()}, nil
}

// pullWorkspace makes this node's workspace of s the one its checkpoint
// committed (w), fetching from the move's source what the store lacks,
// and reports what that cost. A moveRefusal fails the move; any other
// error is retried by the next pass (what was fetched is kept).
func (r *Runner) pullWorkspace(ctx context.Context, s *fsmpb.Session, w *fsmpb.Workspace) (*fsmpb.WorkspaceTransfer, error) {
	start := time.Now()
	t, err := r.restoreWorkspace(ctx, s, w)
	if err != nil {
		return nil, err
	}
	t.RestoreNanos = time.Since(start).Nanoseconds()
	return t, nil
}

func (r *Runner) restoreWorkspace(ctx context.Context, s *fsmpb.Session, w *fsmpb.Workspace) (*fsmpb.WorkspaceTransfer, error) {
	m := s.Move
	from := cmp.Or(m.WorkspaceFrom, m.SourceNode)
	man, t, err := r.fetchSnapshot(ctx, from, w.Digest)
	if err != nil {
		return nil, err
	}
	dir, err := Workspace(r.cfg.WorkspaceRoot, s.SessionId)
	if err != nil {
		return nil, err
	}
	store := r.cfg.Workspaces
	// A node the session comes back to may still hold the very tree the
	// checkpoint carries (nothing changed since it left): keep it.
	if have, err := workspace.Snapshot(dir, store, r.cfg.MaxWorkspaceBytes); err == nil && have.Digest() == w.Digest {
		r.logger.Info("move: workspace already in place", "session", s.SessionId, "move", m.MoveId, "digest", w.Digest)
		return t, nil
	}
	// Materialize reads every chunk verified by its hash, and the manifest
	// was verified by its digest: the tree it swaps in is the checkpoint's.
	if err := workspace.Materialize(dir, man, store, r.cfg.MaxWorkspaceBytes); err != nil {
		var ref *workspace.Refusal
		switch {
		case errors.Is(err, workspace.ErrDigestMismatch):
			// A chunk of this store was altered on disk: it is dropped,
			// and the next pass fetches it again.
			return nil, fmt.Errorf("restoring the workspace on %s: %w", r.cfg.Node, err)
		case errors.As(err, &ref):
			return nil, moveRefusal(fmt.Sprintf("%s: restoring the workspace on %s: %v", ReasonWorkspaceRefused, r.cfg.Node, err))
		}
		return nil, err
	}
	r.logger.Info("move: workspace restored", "session", s.SessionId, "move", m.MoveId, "digest", w.Digest, "from", from, "bytes", w.Bytes, "chunks", w.Chunks)
	return t, nil
}

// fetchSnapshot makes this node's store hold the snapshot digest that
// node from's store holds: its manifest (verified, validated) and the
// chunks this store lacks (each verified). It reports what crossed.
func (r *Runner) fetchSnapshot(ctx context.Context, from, digest string) (*workspace.Manifest, *fsmpb.WorkspaceTransfer, error) {
	store := r.cfg.Workspaces
	t := &fsmpb.WorkspaceTransfer{}
	var src WorkspaceSource
	source := func() (WorkspaceSource, error) {
		var err error
		if src == nil {
			src, err = r.cfg.Sources(from)
		}
		return src, err
	}
	man, err := store.Manifest(digest)
	if err != nil {
		// Not held here yet: ask the node that holds it.
		src, err := source()
		if err != nil {
			return nil, nil, err
		}
		raw, err := src.Manifest(ctx, digest)
		if err != nil {
			return nil, nil, sourceLost(err, from, digest)
		}
		if man, err = workspace.UnmarshalManifest(raw); err != nil {
			return nil, nil, moveRefusal(fmt.Sprintf("%s: the workspace manifest from %s: %v", ReasonWorkspaceRefused, from, err))
		}
		if d := man.Digest(); d != digest {
			return nil, nil, moveRefusal(fmt.Sprintf("%s: the manifest %s sent has digest %s, not %s", fsm.ReasonWorkspaceDigestMismatch, from, d, digest))
		}
		if err := workspace.Validate(man, r.cfg.MaxWorkspaceBytes); err != nil {
			return nil, nil, moveRefusal(fmt.Sprintf("%s: the workspace from %s: %v", ReasonWorkspaceRefused, from, err))
		}
	}
	// Only what this store lacks crosses (an earlier move, a broken
	// transfer resumed, a chunk found altered and dropped).
	missing := store.Missing(man)
	sizes := man.ChunkSizes()
	for _, h := range man.Chunks() {
		t.ChunksPresent++
		t.BytesPresent += uint64(sizes[h])
	}
	for _, h := range missing {
		t.ChunksPresent--
		t.BytesPresent -= uint64(sizes[h])
		t.ChunksSent++
		t.BytesSent += uint64(sizes[h])
	}
	if len(missing) > 0 {
		src, err := source()
		if err != nil {
			return nil, nil, err
		}
		fetched := time.Now()
		if err := r.fetchChunks(ctx, src, from, missing); err != nil {
			return nil, nil, err
		}
		t.FetchNanos = time.Since(fetched).Nanoseconds()
	}
	if _, err := store.PutManifest(man); err != nil {
		return nil, nil, err
	}
	return man, t, nil
}

// fetchChunks reads the missing chunks from the source into the store,
// each verified by its hash as it is stored.
func (r *Runner) fetchChunks(ctx context.Context, src WorkspaceSource, from string, missing []string) error {
	batches := make(chan []string, len(missing)/fetchBatch+1)
	for len(missing) > 0 {
		batch := missing[:min(fetchBatch, len(missing))]
		missing = missing[len(batch):]
		batches <- batch
	}
	close(batches)
	g, ctx := errgroup.WithContext(ctx)
	for range fetchStreams {
		g.Go(func() error {
			for batch := range batches {
				if err := r.fetchBatch(ctx, src, from, batch); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// fetchBatch reads one batch of chunks from the source into the store,
// in one pack: what arrived before an error is kept.
func (r *Runner) fetchBatch(ctx context.Context, src WorkspaceSource, from string, batch []string) (err error) {
	recv := r.cfg.Workspaces.Receiver()
	defer func() {
		if cerr := recv.Close(); err == nil {
			err = cerr
		}
	}()
	err = src.Chunks(ctx, batch, func(hash string, data []byte) error {
		if err := recv.Put(hash, data); err != nil {
			if errors.Is(err, workspace.ErrDigestMismatch) {
				return moveRefusal(fmt.Sprintf("%s: chunk %s from %s: %v", fsm.ReasonWorkspaceDigestMismatch, hash, from, err))
			}
			return err
		}
		return nil
	})
	if err != nil {
		var mr moveRefusal
		if errors.As(err, &mr) {
			return mr
		}
		return sourceLost(err, from, "")
	}
	return nil
}

// sourceLost turns the source's NOT_FOUND (it no longer holds what its
// checkpoint named) into a refusal; anything else is retried.
func sourceLost(err error, from, digest string) error {
	if fsm.ReasonOf(err) == fsm.ReasonNotFound {
		return moveRefusal(fmt.Sprintf("%s: %s no longer holds the checkpointed workspace %s: %v", fsm.ReasonWorkspaceDigestMismatch, from, digest, err))
	}
	return err
}

// moveRefusal is why a move cannot go on: the runner fails it.
type moveRefusal string

func (m moveRefusal) Error() string { return string(m) }
