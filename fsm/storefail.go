package fsm

import (
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// ReasonStorageFailed is the error of every entry an FSM meets after a
// write of its database failed.
const ReasonStorageFailed Reason = "STORAGE_FAILED"

// StoreError is a failed write of the FSM's database (a full disk, an I/O
// error). Raft's FSM interface cannot return it, so the FSM stops applying
// there, like a halt (rules.go): the write was rolled back, the file still
// names the last index it applied, and a restart continues from it once
// the disk takes writes again.
type StoreError struct {
	// Path is the database file; Err what the write returned.
	Path string
	Err  error
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("cannot write %s: %v", e.Path, e.Err)
}

func (e *StoreError) Unwrap() error { return e.Err }

// storeHooks are what the FSM's owner (cluster) hands it: fault, consulted
// before each write transaction commits (a test injecting a full disk;
// nil in production), and failed, told of the write that failed (it logs
// it and, for a full disk, may end the process).
type storeHooks struct {
	fault  func() error
	failed func(*StoreError)
}

type storeState struct {
	hooks atomic.Pointer[storeHooks]
	err   atomic.Pointer[StoreError]
}

// SetStoreHooks installs fault and failed (either may be nil).
func (f *FSM) SetStoreHooks(fault func() error, failed func(*StoreError)) {
	f.store.hooks.Store(&storeHooks{fault: fault, failed: failed})
}

// StoreFailed is the write of the database that failed, nil while every
// write succeeded. Once set, the FSM applies nothing more in this process.
func (f *FSM) StoreFailed() *StoreError { return f.store.err.Load() }

// injectedFault is the test's fault for the write about to commit.
func (f *FSM) injectedFault() error {
	if h := f.store.hooks.Load(); h != nil && h.fault != nil {
		return h.fault()
	}
	return nil
}

// storeFailed records a failed write and tells the owner; without one it
// logs it.
func (f *FSM) storeFailed(err error) *StoreError {
	se := &StoreError{Path: f.path, Err: err}
	if !f.store.err.CompareAndSwap(nil, se) {
		return f.store.err.Load()
	}
	if h := f.store.hooks.Load(); h != nil && h.failed != nil {
		h.failed(se)
	} else {
		f.logger.Error("fsm: stopped applying the raft log", "error", se)
	}
	return se
}

// storeFailedResults answers every command entry of logs with an error
// naming the failed write.
func storeFailedResults(logs []*raft.Log, out []interface{}, se *StoreError) []interface{} {
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			out[i] = []*fsmpb.Result{{Error: errorf(ReasonStorageFailed, "%v", se).toProto()}}
		}
	}
	return out
}
