package runner

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/workspace"
)

// Recovery copies (DESIGN.md §8): after each completed turn the host
// snapshots the session's workspace and has one other node copy it (the
// copy node reads what it lacks from the host's store, like a move's
// destination), then records the copy, fenced by its epoch. A recovery —
// the host is gone — restores the workspace from the newest copy. The
// copy runs beside the session's next turns: it never delays one, and a
// turn that ends while one is in flight is copied once that ends.

// WorkspaceHolder is another node as a keeper of workspace copies.
type WorkspaceHolder interface {
	// Copy makes the node hold snapshot digest of the session, read from
	// node from's store.
	// It reports what crossed.
	Copy(ctx context.Context, sessionID, digest, from string) (*fsmpb.WorkspaceTransfer, error)
}

// copyState coalesces the copies of one session: one at a time, and the
// newest turn's next.
type copyState struct {
	running bool
	next    *copyJob
}

type copyJob struct {
	epoch, afterInput, turns uint64
	ended                    time.Time // when the turn ended: a copy's time counts from it
}

// copyAfterTurn starts (or queues) the copy of s's workspace after the
// turn of input inputSeq completed.
func (r *Runner) copyAfterTurn(s *fsmpb.Session, inputSeq uint64) {
	if !r.movesWorkspaces() {
		return
	}
	job := &copyJob{epoch: s.Epoch, afterInput: inputSeq, turns: s.TurnsCompleted + 1, ended: time.Now()}
	r.mu.Lock()
	if r.copies == nil {
		r.copies = map[string]*copyState{}
	}
	st := r.copies[s.SessionId]
	if st == nil {
		st = &copyState{}
		r.copies[s.SessionId] = st
	}
	if st.running {
		st.next = job
		r.mu.Unlock()
		return
	}
	st.running = true
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for job != nil {
			r.copyWorkspace(s.SessionId, job)
			r.mu.Lock()
			job, st.next = st.next, nil
			if job == nil {
				st.running = false
				delete(r.copies, s.SessionId)
			}
			r.mu.Unlock()
		}
	}()
}

// copyWorkspace snapshots the session's workspace, has the first node
// (by name) other than this one that takes it hold a copy, and records it.
// Failures are logged: the previous copy stays the session's.
func (r *Runner) copyWorkspace(id string, job *copyJob) {
	ctx := r.ctx
	dir, err := Workspace(r.cfg.WorkspaceRoot, id)
	if err != nil {
		return
	}
	m, err := workspace.Snapshot(dir, r.cfg.Workspaces, r.cfg.MaxWorkspaceBytes)
	if err != nil {
		r.logger.Warn("workspace copy: snapshot", "session", id, "error", err)
		return
	}
	digest := m.Digest() // Snapshot stored the manifest
	recs, err := r.cfg.FSM.Nodes()
	if err != nil {
		return
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
	for _, rec := range recs {
		if rec.Name == r.cfg.Node || rec.Draining {
			continue
		}
		src, err := r.cfg.Sources(rec.Name)
		if err != nil {
			continue
		}
		holder, ok := src.(WorkspaceHolder)
		if !ok {
			return
		}
		t, err := holder.Copy(ctx, id, digest, r.cfg.Node)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.logger.Debug("workspace copy: a node did not take it", "session", id, "node", rec.Name, "error", err)
			continue
		}
		cp := &fsmpb.WorkspaceCopy{Workspace: &fsmpb.Workspace{Digest: digest, Bytes: uint64(m.Bytes()), Chunks: uint32(len(m.Chunks()))},
			Node: rec.Name, AfterInput: job.afterInput, TurnsCompleted: job.turns, Transfer: t, CopyNanos: time.Since(job.ended).Nanoseconds()}
		err = retry(ctx, func(ctx context.Context) error { return r.cfg.Writer.RecordWorkspaceCopy(ctx, id, job.epoch, cp) })
		if err != nil && ctx.Err() == nil {
			r.logger.Info("workspace copy: not recorded", "session", id, "node", rec.Name, "error", err)
		}
		return
	}
}

// HoldCopy makes this node's store hold snapshot digest read from node
// from (a host shipping a session's workspace after a turn). It reports
// the bytes fetched and those already held.
func (r *Runner) HoldCopy(ctx context.Context, digest, from string) (*fsmpb.WorkspaceTransfer, error) {
	if !r.movesWorkspaces() {
		return nil, errors.New("this node keeps no workspace copies")
	}
	_, t, err := r.fetchSnapshot(ctx, from, digest)
	if err != nil {
		var mr moveRefusal
		if errors.As(err, &mr) {
			return nil, errors.New(string(mr))
		}
		return nil, err
	}
	return t, nil
}

// resetWorkspace empties s's workspace: a recovery that found no copy
// starts the session with nothing, as its journal says.
func (r *Runner) resetWorkspace(s *fsmpb.Session) error {
	dir, err := Workspace(r.cfg.WorkspaceRoot, s.SessionId)
	if err != nil {
		return err
	}
	return workspace.Materialize(dir, &workspace.Manifest{}, r.cfg.Workspaces, r.cfg.MaxWorkspaceBytes)
}
