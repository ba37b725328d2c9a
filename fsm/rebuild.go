package fsm

import (
	"fmt"
	"io"
	"iter"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Rebuilds. A replica's state must be exactly what its latest snapshot and
// its Raft log produce; a scratch FSM rebuilt from them (Rebuild) and then
// compared by Content proves it. Where the snapshot and the entries come
// from is the caller's business: this package knows nothing of log stores.

// Entries go to ApplyBatch in groups of at most this many (what Raft hands
// the FSM at most, MaxAppendEntries in cluster/) or this many bytes, so a
// long log is replayed in bounded memory. How they are grouped does not
// change the state (determinism_test.go).
const (
	rebuildBatchEntries = 128
	rebuildBatchBytes   = 8 << 20
)

// Rebuild opens a fresh FSM in dir (a directory of its own: Open discards
// any database there), restores snap into it when snap is not nil, and
// applies entries in order, of every type, as Raft would have: ApplyBatch
// skips what is not a command and records the index of the last entry.
// The caller closes the FSM and removes dir. An error reading entries is
// returned wrapped as it came; a failure to write the scratch database is
// returned too, where the live FSM would crash the node.
func Rebuild(dir string, snap io.Reader, entries iter.Seq2[*raft.Log, error], logger hclog.Logger) (*FSM, error) {
	f, err := Open(dir, logger)
	if err != nil {
		return nil, err
	}
	if err := rebuildInto(f, snap, entries); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func rebuildInto(f *FSM, snap io.Reader, entries iter.Seq2[*raft.Log, error]) error {
	if snap != nil {
		if err := f.Restore(io.NopCloser(snap)); err != nil {
			return err
		}
	}
	var batch []*raft.Log
	size := 0
	for l, err := range entries {
		if err != nil {
			return err
		}
		batch = append(batch, l)
		size += len(l.Data)
		if len(batch) == rebuildBatchEntries || size >= rebuildBatchBytes {
			if err := f.applyScratch(batch); err != nil {
				return err
			}
			batch, size = batch[:0], 0
		}
	}
	return f.applyScratch(batch)
}

// applyScratch is ApplyBatch for a scratch FSM: a write the database
// refused (StoreFailed), or a panic of a write inside the transaction,
// becomes an error. bbolt rolls back a transaction whose function
// panicked, and ApplyBatch releases its lock in a defer, so the FSM is
// still usable to close.
func (f *FSM) applyScratch(logs []*raft.Log) (err error) {
	if len(logs) == 0 {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("apply entries %d-%d: %v", logs[0].Index, logs[len(logs)-1].Index, p)
		}
	}()
	f.ApplyBatch(logs)
	if se := f.StoreFailed(); se != nil {
		return fmt.Errorf("apply entries %d-%d: %w", logs[0].Index, logs[len(logs)-1].Index, se)
	}
	return nil
}
