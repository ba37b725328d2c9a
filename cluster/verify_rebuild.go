package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fak-dev/fak/fsm"
)

// The rebuilds of VerifyReplay (verify.go): scratch FSMs fed from this
// node's snapshot store and log store.

// rebuild builds the state at index x into a scratch FSM, from snap (nil:
// from the log alone) and the log entries after it, and compares it with
// the live content.
func (c *Cluster) rebuild(ctx context.Context, live *fsm.Content, snap *raft.SnapshotMeta, x uint64) (*ReplayRebuild, error) {
	start := time.Now()
	r := &ReplayRebuild{Source: SourceLog, FirstIndex: 1}
	var state io.Reader
	if snap != nil {
		meta, rc, err := c.snapshots.Open(snap.ID)
		if err != nil {
			return nil, &errRaced{fmt.Errorf("open snapshot %s: %w", snap.ID, err)}
		}
		defer rc.Close()
		r.Source, r.SnapshotID, r.SnapshotIndex, r.FirstIndex = SourceSnapshotAndLog, meta.ID, meta.Index, meta.Index+1
		state = contextReader{ctx, rc}
	}
	if r.FirstIndex <= x {
		r.LastIndex, r.Entries = x, x-r.FirstIndex+1
	}
	dir, err := os.MkdirTemp(c.cfg.DataDir, scratchPrefix)
	if err != nil {
		return nil, fmt.Errorf("scratch dir: %w", err)
	}
	defer os.RemoveAll(dir)
	scratch, err := fsm.Rebuild(dir, state, c.logEntries(ctx, r.FirstIndex, x), c.logger.Named("replay-check"))
	if err != nil {
		if errors.Is(err, raft.ErrLogNotFound) {
			// Compacted past what this rebuild needs (maybe just now, by
			// a newer snapshot: VerifyReplay starts over).
			err = &errRaced{fmt.Errorf("the log no longer holds entries %d-%d: %w", r.FirstIndex, x, err)}
		}
		return nil, fmt.Errorf("rebuild from %s: %w", r.Source, err)
	}
	defer scratch.Close()
	got, err := scratch.Content()
	if err != nil {
		return nil, fmt.Errorf("digest the rebuilt fsm: %w", err)
	}
	r.Digest, r.Equal = got.Digest, got.Digest == live.Digest
	if !r.Equal {
		r.Differences = live.DiffBuckets(got)
		// The live FSM has moved on unless the fleet was idle; the bucket
		// digests say where anyway.
		if d, err := c.fsm.FirstDiff(scratch, x); err == nil {
			r.FirstDiff = d
		}
	}
	r.Duration = time.Since(start)
	return r, nil
}

// logEntries reads the log entries from..to of the local log store, which
// raft-boltdb serves from read transactions, safe beside Raft's writes.
func (c *Cluster) logEntries(ctx context.Context, from, to uint64) iter.Seq2[*raft.Log, error] {
	return func(yield func(*raft.Log, error) bool) {
		for i := from; i <= to; i++ {
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			l := new(raft.Log)
			if err := c.logStore.GetLog(i, l); err != nil {
				yield(nil, fmt.Errorf("log entry %d: %w", i, err))
				return
			}
			if !yield(l, nil) {
				return
			}
		}
	}
}
