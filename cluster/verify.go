package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fak-dev/fak/fsm"
)

// The replay-equivalence check. A replica's state is derived: it must be
// exactly what its latest snapshot plus its Raft log produce, and what the
// log alone produces while the log still starts at index 1. VerifyReplay
// rebuilds both into scratch FSMs beside the live one and compares
// content digests (never file bytes, which differ run to run). The live
// FSM is only read; Raft goes on committing and applying meanwhile.

// Sources of a rebuild.
const (
	SourceSnapshotAndLog = "snapshot+log"
	SourceLog            = "log"
)

// ErrReplayBusy: a replay check is already running on this node.
var ErrReplayBusy = errors.New("a replay check is already running on this node")

// verifyAttempts bounds how often a check starts over after racing Raft
// (a snapshot reaped, or log entries compacted, between listing and
// reading them); verifyRetryWait is the pause before each new attempt.
const (
	verifyAttempts  = 5
	verifyRetryWait = 100 * time.Millisecond
)

// scratchPrefix names the scratch directories of rebuilds in the data dir.
const scratchPrefix = "replay-check-"

// ReplayReport is the outcome of one check of this node's replica.
type ReplayReport struct {
	Node string
	// The live FSM's applied index and content digest, read together.
	LiveIndex  uint64
	LiveDigest string
	// Rebuilds[0] restores the latest snapshot at or below LiveIndex and
	// replays the log after it (the log alone when there is no snapshot);
	// Rebuilds[1], when present, replays the log alone from index 1.
	Rebuilds []ReplayRebuild
	// LogOnlySkipped says why no rebuild from the log alone ran ("" when
	// one did).
	LogOnlySkipped string
	// Equal: every rebuild equals the live FSM.
	Equal bool
}

// ReplayRebuild is one rebuild of the state at the live index.
type ReplayRebuild struct {
	Source        string // SourceSnapshotAndLog or SourceLog
	SnapshotID    string
	SnapshotIndex uint64
	// Log entries replayed: FirstIndex..LastIndex, Entries of them (0:
	// none, the snapshot is at the live index).
	FirstIndex, LastIndex, Entries uint64
	Digest                         string
	Equal                          bool
	// For a mismatch: the buckets that differ (Keys: live, OtherKeys: the
	// rebuild) and, when the live FSM was still at the index once the
	// rebuild finished, the first key that differs.
	Differences []fsm.BucketDiff
	FirstDiff   *fsm.KeyDiff
	Duration    time.Duration
}

// errRaced marks a failure that a new attempt may not meet: Raft moved
// (snapshotted, compacted, applied) while the check was reading.
type errRaced struct{ err error }

func (e *errRaced) Error() string { return e.err.Error() }
func (e *errRaced) Unwrap() error { return e.err }

// VerifyReplay checks this node's replica: see the top of this file. A
// mismatch is a report with Equal false; an error means the check could not
// be carried out (the log no longer holds what follows the snapshot, a
// scratch database could not be written, ctx ended).
func (c *Cluster) VerifyReplay(ctx context.Context) (*ReplayReport, error) {
	if !c.verifying.TryLock() {
		return nil, ErrReplayBusy
	}
	defer c.verifying.Unlock()
	// A check cut short by a crash leaves its scratch directory behind.
	old, _ := filepath.Glob(filepath.Join(c.cfg.DataDir, scratchPrefix+"*"))
	for _, dir := range old {
		os.RemoveAll(dir)
	}
	var err error
	for attempt := 1; ; attempt++ {
		var rep *ReplayReport
		rep, err = c.verifyReplay(ctx)
		var raced *errRaced
		if err == nil || !errors.As(err, &raced) || attempt == verifyAttempts {
			if err == nil {
				c.logger.Info("replay check", "index", rep.LiveIndex, "equal", rep.Equal, "rebuilds", len(rep.Rebuilds))
			}
			return rep, err
		}
		c.logger.Debug("replay check raced raft, starting over", "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.shutdownCh:
			return nil, ErrShutdown
		case <-time.After(verifyRetryWait):
		}
	}
}

func (c *Cluster) verifyReplay(ctx context.Context) (*ReplayReport, error) {
	// Snapshots first: every one listed was then taken of a state the live
	// FSM has reached by the time it is read (a snapshot taken during the
	// read, with a higher index, is simply not used).
	snaps, err := c.snapshots.List()
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	live, err := c.fsm.Content()
	if err != nil {
		return nil, fmt.Errorf("digest the live fsm: %w", err)
	}
	x := live.AppliedIndex
	rep := &ReplayReport{Node: c.cfg.Name, LiveIndex: x, LiveDigest: live.Digest}
	snap, err := latestSnapshot(snaps, x)
	if err != nil {
		return nil, err
	}
	first, err := c.logStore.FirstIndex()
	if err != nil {
		return nil, fmt.Errorf("first log index: %w", err)
	}
	if snap == nil && first > 1 {
		return nil, &errRaced{fmt.Errorf("no snapshot at or below index %d, and the log starts at %d", x, first)}
	}
	r, err := c.rebuild(ctx, live, snap, x)
	if err != nil {
		return nil, err
	}
	rep.Rebuilds = append(rep.Rebuilds, *r)
	switch {
	case snap == nil:
		rep.LogOnlySkipped = "no snapshot: the first rebuild replayed the log alone"
	case first == 0:
		rep.LogOnlySkipped = "the log holds no entry (compacted, or removed when a snapshot was installed)"
	case first != 1:
		rep.LogOnlySkipped = fmt.Sprintf("the log starts at index %d (compacted by snapshots)", first)
	default:
		if why := c.logAloneProblem(x); why != "" {
			rep.LogOnlySkipped = why
			break
		}
		r, err := c.rebuild(ctx, live, nil, x)
		var raced *errRaced
		switch {
		case errors.As(err, &raced):
			// Compacted meanwhile, or a hole where a snapshot was installed
			// (a restore, or a catch-up): the log alone cannot say.
			rep.LogOnlySkipped = "the log alone no longer reaches the live index: " + err.Error()
		case err != nil:
			return nil, err
		default:
			rep.Rebuilds = append(rep.Rebuilds, *r)
		}
	}
	rep.Equal = true
	for _, r := range rep.Rebuilds {
		rep.Equal = rep.Equal && r.Equal
	}
	return rep, nil
}

// latestSnapshot is the newest of snaps (newest first) at or below index x
// (nil: none). A newer one means the live FSM had not yet applied what
// Raft snapshotted: a snapshot taken at a no-op entry, or restored by an
// operator (its state records an older applied index), just before the
// entry that follows it is applied.
func latestSnapshot(snaps []*raft.SnapshotMeta, x uint64) (*raft.SnapshotMeta, error) {
	if len(snaps) == 0 {
		return nil, nil
	}
	if s := snaps[0]; s.Index > x {
		return nil, &errRaced{fmt.Errorf("snapshot %s is at index %d, past the applied index %d", s.ID, s.Index, x)}
	}
	return snaps[0], nil
}

// logAloneProblem says why a log that starts at index 1 still cannot
// rebuild the state at x alone ("" if it can). By Raft's log matching
// property a log whose entry at a snapshot's index has the snapshot's term
// holds every earlier entry as the leader committed it. A snapshot this
// node installed (from a leader, as catch-up, or an operator's restore)
// breaks that: its index may hold no entry, or a stale one of an older
// term, with stale entries below it that Raft never replaced. A snapshot
// installed and since reaped (2 are kept) goes unseen, but by then the
// snapshots taken after it have normally compacted the log past it.
func (c *Cluster) logAloneProblem(x uint64) string {
	snaps, err := c.snapshots.List()
	if err != nil {
		return "list snapshots: " + err.Error()
	}
	for _, s := range snaps {
		if s.Index > x {
			continue
		}
		var l raft.Log
		err := c.logStore.GetLog(s.Index, &l)
		switch {
		case errors.Is(err, raft.ErrLogNotFound):
			return fmt.Sprintf("the log has no entry at index %d, where snapshot %s was installed", s.Index, s.ID)
		case err != nil:
			return fmt.Sprintf("log entry %d: %v", s.Index, err)
		case l.Term != s.Term:
			return fmt.Sprintf("the log's entry %d is of term %d, snapshot %s of term %d: it was installed over a stale log",
				s.Index, l.Term, s.ID, s.Term)
		}
	}
	return ""
}
