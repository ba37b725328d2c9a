package fsm

import (
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// DedupWindow is how long the FSM remembers a request id. A retry (of a hook,
// a client, or the server's own forwarding across an election) arriving
// within the window returns the original result. It is a constant, not a
// setting, because every replica must prune at the same log position.
const DedupWindow int64 = 10 * 60 * 1e9 // 10 minutes in nanoseconds

// MaxRequestIDBytes bounds a request id. Longer ids are refused with
// INVALID_ARGUMENT (they could not be stored as a bbolt key anyway).
const MaxRequestIDBytes = 128

// maxPrunePerEntry bounds the dedup pruning work done by one log entry.
const maxPrunePerEntry = 512

// FSM is the replicated state machine. It implements raft.FSM and
// raft.BatchingFSM; one bbolt write transaction covers a whole batch of log
// entries.
type FSM struct {
	logger hclog.Logger
	path   string

	// mu guards the db pointer: Restore swaps it (write lock); everything
	// else reads through it (read lock).
	mu sync.RWMutex
	db *bolt.DB

	applied atomic.Uint64
	// halted: the entry this FSM stopped at (rules.go); nil while it
	// applies.
	halted atomic.Pointer[HaltError]
	// store: the write of the database that failed, and the owner's hooks
	// (storefail.go).
	store storeState
	// kept: the index a database kept from a clean shutdown had applied
	// (kept.go); entries up to it are not applied again.
	kept atomic.Uint64
	// logBytes: the bytes of the log entries applied since this FSM
	// opened; snapBytes: their count when the last snapshot was taken
	// (snapshot_policy in cluster).
	logBytes, snapBytes atomic.Uint64
	// snapIndex, snapState: the applied index and the size of the state
	// the last snapshot copied (at open: the state as opened).
	snapIndex atomic.Uint64
	snapState atomic.Int64
	// restores counts Restore calls: state that may have gone backwards,
	// which whoever caches what it read (the runner's runtimes) must drop.
	restores atomic.Uint64
	// voters lists the Raft voters, for deciding whether a snapshot may
	// be compressed (snapshot_codec.go); nil: never.
	voters atomic.Pointer[func() ([]string, error)]

	notifyMu      sync.Mutex
	notify        chan struct{}
	appliedNotify chan struct{}

	changes changeFeed
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// Open opens the FSM's database in dir: the one a clean shutdown left
// (kept.go), or else a fresh one — raft then restores the latest snapshot
// and replays the log after it, so a database is never trusted across a
// crash.
func Open(dir string, logger hclog.Logger) (*FSM, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	path := filepath.Join(dir, "fsm.db")
	db, kept, crashed, discarded, err := openKept(path)
	if err != nil {
		return nil, err
	}
	switch {
	case kept > 0 && crashed:
		logger.Info("fsm: kept the database of a process that did not shut down cleanly; the machine has not restarted since, so every write it made is there", "applied", kept)
	case kept > 0:
		logger.Info("fsm: kept the database of a clean shutdown", "applied", kept)
	case discarded != "":
		logger.Info("fsm: rebuilding the database from the snapshot and log", "why", discarded)
	}
	f := &FSM{logger: logger, path: path, db: db, notify: make(chan struct{}), appliedNotify: make(chan struct{})}
	f.kept.Store(kept)
	f.applied.Store(kept)
	if n, err := f.StateBytes(); err == nil {
		f.snapState.Store(n)
	}
	return f, nil
}

// Close syncs the database, marks it clean for the next start to keep,
// and releases it.
func (f *FSM) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := markClean(f.db); err != nil {
		f.logger.Warn("fsm: could not mark the database clean; the next start rebuilds it", "error", err)
	}
	return f.db.Close()
}

// AppliedIndex is the index of the last Raft log entry applied.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// Changed returns a channel closed at the next applied batch that applied
// a command, or restore. Watchers wait on it, then re-read from the
// database. (A batch of only empty entries — a new leader's barrier, a
// commit nudge — changes no state and does not close it.)
func (f *FSM) Changed() <-chan struct{} {
	f.notifyMu.Lock()
	defer f.notifyMu.Unlock()
	return f.notify
}

// Applied returns a channel closed at the next applied batch of any kind,
// or restore: for waiters on AppliedIndex.
func (f *FSM) Applied() <-chan struct{} {
	f.notifyMu.Lock()
	defer f.notifyMu.Unlock()
	return f.appliedNotify
}

// broadcast wakes the waiters on Applied and, when state changed, on
// Changed.
func (f *FSM) broadcast(changed bool) {
	f.notifyMu.Lock()
	close(f.appliedNotify)
	f.appliedNotify = make(chan struct{})
	if changed {
		close(f.notify)
		f.notify = make(chan struct{})
	}
	f.notifyMu.Unlock()
}

// Apply applies one log entry. It returns []*fsmpb.Result, one per command.
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies log entries in one database transaction. Each response
// is a []*fsmpb.Result with one result per command of the entry (nil for
// configuration and no-op entries).
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	if len(logs) == 0 {
		return out
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if h := f.halted.Load(); h != nil {
		return haltedResults(logs, out, h)
	}
	if se := f.store.err.Load(); se != nil {
		return storeFailedResults(logs, out, se)
	}
	var written []SessionChange
	var halt *HaltError
	commands := false
	last := logs[len(logs)-1].Index
	err := f.db.Update(func(tx *bolt.Tx) error {
		a := newApplier(tx)
		defer func() { written = a.touched.list }()
		kept := f.kept.Load()
		for i, l := range logs {
			if l.Type != raft.LogCommand || l.Index <= kept {
				continue // kept: applied before the restart
			}
			rs, needs, unknown := a.applyEntry(l.Data)
			if unknown {
				// Never skipped: nothing from here on applies.
				halt, last = &HaltError{Index: l.Index, Needs: needs}, l.Index-1
				break
			}
			f.logBytes.Add(uint64(len(l.Data)))
			out[i] = rs
			commands = commands || len(rs) > 0
		}
		// Entries replayed below a kept index leave it where it was.
		if err := tx.Bucket(bucketMeta).Put(keyAppliedIndex, u64(max(last, kept))); err != nil {
			return err
		}
		return f.injectedFault()
	})
	if err != nil {
		// The database is local derived state; failing to write it (a full
		// disk) means this replica can no longer follow the log. bbolt
		// rolled the transaction back, so rather than diverge it stops
		// applying here (storefail.go): its owner ends the process with
		// one line saying why, the fleet continues, and a restart with
		// room on the disk continues from the index the file names.
		return storeFailedResults(logs, out, f.storeFailed(err))
	}
	f.applied.Store(max(last, f.kept.Load()))
	f.changes.publish(written)
	f.broadcast(commands)
	if halt != nil {
		f.halted.Store(halt)
		f.logger.Error("fsm: stopped applying the raft log", "error", halt)
		return haltedResults(logs, out, halt)
	}
	return out
}

// haltedResults answers, for a halted FSM, every command entry of logs it
// has not answered with an error naming the halt.
func haltedResults(logs []*raft.Log, out []interface{}, h *HaltError) []interface{} {
	for i, l := range logs {
		if l.Type == raft.LogCommand && l.Index >= h.Index {
			out[i] = []*fsmpb.Result{{Error: errorf(ReasonRulesUnknown, "%v", h).toProto()}}
		}
	}
	return out
}

// applier applies commands inside one write transaction.
type applier struct {
	tx       *bolt.Tx
	sessions *bolt.Bucket
	journal  *bolt.Bucket
	requests *bolt.Bucket
	expiry   *bolt.Bucket
	attach   *bolt.Bucket
	envs     *bolt.Bucket
	launches *bolt.Bucket
	lineage  *bolt.Bucket
	nodes    *bolt.Bucket

	// touched: the sessions written (change feed); ownWrite: the command
	// being applied is a runner's own write.
	touched  touched
	ownWrite bool
}

// appendFillPercent: journal chunks are appended at the end of their
// session's key range and request/expiry keys are time-ordered, so pages
// split while still filling; bbolt's default of 50% would leave most pages
// half empty, doubling the file and the snapshots copied from it.
const appendFillPercent = 0.9

func newApplier(tx *bolt.Tx) *applier {
	a := &applier{
		tx:       tx,
		sessions: tx.Bucket(bucketSessions),
		journal:  tx.Bucket(bucketJournal),
		requests: tx.Bucket(bucketRequests),
		expiry:   tx.Bucket(bucketExpiry),
		attach:   tx.Bucket(bucketAttachments),
		envs:     tx.Bucket(bucketEnvelopes),
		launches: tx.Bucket(bucketLaunches),
		lineage:  tx.Bucket(bucketLineage),
		nodes:    tx.Bucket(bucketNodes),
	}
	a.journal.FillPercent = appendFillPercent
	a.requests.FillPercent = appendFillPercent
	a.expiry.FillPercent = appendFillPercent
	return a
}

// applyEntry applies one entry's commands; unknown reports (and applies
// nothing) when one needs rules this build does not have.
func (a *applier) applyEntry(data []byte) (rs []*fsmpb.Result, needs uint32, unknown bool) {
	cmds, ignore, err := decodeEntry(data)
	if ignore {
		return nil, 0, false
	}
	if err != nil {
		return []*fsmpb.Result{{Error: errorf(ReasonInvalidArgument, "%v", err).toProto()}}, 0, false
	}
	if needs, unknown := unknownRules(cmds); unknown {
		return nil, needs, true
	}
	// Prune before applying, driven by this entry alone: the outcome must
	// not depend on how raft grouped entries into ApplyBatch calls, which
	// differs between replicas.
	var now int64
	for _, c := range cmds {
		now = max(now, c.TimeUnixNano)
	}
	a.prune(now)
	results := make([]*fsmpb.Result, len(cmds))
	for i, c := range cmds {
		results[i] = a.applyCommand(c)
	}
	return results, 0, false
}

// applyCommand runs one command with request-id deduplication.
func (a *applier) applyCommand(c *fsmpb.Command) *fsmpb.Result {
	if len(c.RequestId) > MaxRequestIDBytes {
		return &fsmpb.Result{Error: errorf(ReasonInvalidArgument,
			"request id longer than %d bytes", MaxRequestIDBytes).toProto()}
	}
	if c.RequestId != "" {
		if prev := a.requests.Get([]byte(c.RequestId)); prev != nil {
			var r fsmpb.Result
			if err := proto.Unmarshal(prev, &r); err == nil {
				return &r
			}
		}
	}
	a.ownWrite = runnersOwnWrite(c)
	r := a.dispatch(c)
	if c.RequestId != "" {
		buf, err := proto.Marshal(r)
		if err != nil {
			panic("fsm: marshal result: " + err.Error())
		}
		a.must(a.requests.Put([]byte(c.RequestId), buf))
		a.must(a.expiry.Put(expiryKey(c.TimeUnixNano, c.RequestId), nil))
	}
	return r
}

func (a *applier) dispatch(c *fsmpb.Command) *fsmpb.Result {
	var (
		r   *fsmpb.Result
		err *Error
	)
	switch body := c.Body.(type) {
	case *fsmpb.Command_CreateSession:
		r, err = a.createSession(c, body.CreateSession)
	case *fsmpb.Command_AppendEvents:
		r, err = a.appendEvents(c, body.AppendEvents)
	case *fsmpb.Command_StopSession:
		r, err = a.stopSession(c, body.StopSession)
	case *fsmpb.Command_Attach:
		r, err = a.attachClient(c, body.Attach)
	case *fsmpb.Command_KeepAlive:
		r, err = a.keepAlive(c, body.KeepAlive)
	case *fsmpb.Command_Detach:
		r, err = a.detach(c, body.Detach)
	case *fsmpb.Command_TakeLease:
		r, err = a.takeLease(c, body.TakeLease)
	case *fsmpb.Command_RenewLease:
		r, err = a.renewLease(c, body.RenewLease)
	case *fsmpb.Command_ReleaseLease:
		r, err = a.releaseLease(c, body.ReleaseLease)
	case *fsmpb.Command_SubmitInput:
		r, err = a.submitInput(c, body.SubmitInput)
	case *fsmpb.Command_InterruptTurn:
		r, err = a.interruptTurn(c, body.InterruptTurn)
	case *fsmpb.Command_RecordWorkspaceCopy:
		r, err = a.recordWorkspaceCopy(c, body.RecordWorkspaceCopy)
	case *fsmpb.Command_PurgeSessions:
		r, err = a.purgeSessions(c, body.PurgeSessions)
	case *fsmpb.Command_AnswerApproval:
		r, err = a.answerApproval(c, body.AnswerApproval)
	case *fsmpb.Command_RunnerAppend:
		r, err = a.runnerAppend(c, body.RunnerAppend)
	case *fsmpb.Command_RecordUsage:
		r, err = a.recordUsage(c, body.RecordUsage)
	case *fsmpb.Command_FreshSession:
		r, err = a.freshSession(c, body.FreshSession)
	case *fsmpb.Command_ResetSession:
		r, err = a.resetSession(c, body.ResetSession)
	case *fsmpb.Command_ClearSession:
		r, err = a.clearSession(c, body.ClearSession)
	case *fsmpb.Command_ForkSession:
		r, err = a.forkSession(c, body.ForkSession)
	case *fsmpb.Command_BindLaunch:
		r, err = a.bindLaunch(c, body.BindLaunch)
	case *fsmpb.Command_ProviderSessionStart:
		r, err = a.providerSessionStart(c, body.ProviderSessionStart)
	case *fsmpb.Command_ProviderSessionEnd:
		r, err = a.providerSessionEnd(c, body.ProviderSessionEnd)
	case *fsmpb.Command_RegisterNode:
		r, err = a.registerNode(c, body.RegisterNode)
	case *fsmpb.Command_SetDraining:
		r, err = a.setDraining(c, body.SetDraining)
	case *fsmpb.Command_RequestMove:
		r, err = a.requestMove(c, body.RequestMove)
	case *fsmpb.Command_MoveCheckpoint:
		r, err = a.moveCheckpoint(c, body.MoveCheckpoint)
	case *fsmpb.Command_MoveAdmit:
		r, err = a.moveAdmit(c, body.MoveAdmit)
	case *fsmpb.Command_MoveRestore:
		r, err = a.moveRestore(c, body.MoveRestore)
	case *fsmpb.Command_MoveCutover:
		r, err = a.moveCutover(c, body.MoveCutover)
	case *fsmpb.Command_MoveFail:
		r, err = a.moveFail(c, body.MoveFail)
	case *fsmpb.Command_MarkStranded:
		r, err = a.markStranded(c, body.MarkStranded)
	case *fsmpb.Command_CreateAclToken:
		r, err = a.createAclToken(c, body.CreateAclToken)
	case *fsmpb.Command_RevokeAclToken:
		r, err = a.revokeAclToken(c, body.RevokeAclToken)
	default:
		err = errorf(ReasonInvalidArgument, "unknown command")
	}
	if err != nil {
		return &fsmpb.Result{Error: err.toProto()}
	}
	return r
}

// prune forgets request ids stamped more than DedupWindow before now (the
// latest time in the entry being applied), at most maxPrunePerEntry of them,
// oldest first, so every replica prunes the same at the same log position.
func (a *applier) prune(now int64) {
	if now <= 0 {
		return
	}
	cutoff := now - DedupWindow
	c := a.expiry.Cursor()
	n := 0
	for k, _ := c.First(); k != nil && n < maxPrunePerEntry; k, _ = c.First() {
		if int64(readU64(k[:8])) >= cutoff {
			break
		}
		a.must(a.requests.Delete(k[8:]))
		a.must(c.Delete())
		n++
	}
}

func (a *applier) must(err error) {
	if err != nil {
		panic("fsm: write: " + err.Error())
	}
}
