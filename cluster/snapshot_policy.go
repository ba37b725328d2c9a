package cluster

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
)

// Amortised snapshots. Raft's own rule takes a snapshot every
// SnapshotThreshold entries, and every snapshot copies the whole state: a
// cost that grows with everything ever written while the entries between
// snapshots stay the same. With SnapshotLogFraction, a node snapshots only
// once the log applied since its last snapshot is that fraction of the
// state that snapshot copied (and at least SnapshotThreshold entries
// long), so each copy is paid for by new log in proportion: the state
// grows by at least that fraction between snapshots, and at 1.0 all
// snapshots together write about twice the final state (1 + 1/2 + …). The trailing log
// Raft keeps after one (TrailingLogs) is unchanged, so a follower briefly
// behind still catches up from the log.

// snapshotDue reports whether the log since the last snapshot is long
// enough, in entries and in bytes (against the state that snapshot
// copied), for the next.
func snapshotDue(entries, threshold, logBytes uint64, stateBytes int64, fraction float64) bool {
	return entries >= threshold && float64(logBytes) >= fraction*float64(stateBytes)
}

func (c *Cluster) snapshotLoop() {
	defer c.wg.Done()
	interval := orDur(c.cfg.SnapshotInterval, DefaultSnapshotInterval)
	threshold := orU64(c.cfg.SnapshotThreshold, DefaultSnapshotThreshold)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.shutdownCh:
			return
		case <-t.C:
		}
		last, state := c.fsm.SnapshotIndex(), c.fsm.SnapshotState()
		applied := c.fsm.AppliedIndex()
		if applied < last || !snapshotDue(applied-last, threshold, c.fsm.LogBytesSinceSnapshot(), state, c.cfg.SnapshotLogFraction) {
			continue
		}
		if err := c.snapshotNow().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			c.logger.Warn("snapshot", "error", err)
		}
	}
}

// A clean shutdown keeps the FSM database (fsm/kept.go), but on the next
// start Raft still reads and decodes every log entry after its latest
// snapshot before the FSM skips it: gigabytes, seconds, when the
// amortised policy let the log grow to the state's size. So a node shutting
// down with more than shutdownSnapshotFraction of its state in log since
// its last snapshot (and at least shutdownSnapshotMin bytes) takes one
// first: its restart then replays next to nothing. The copy costs the
// shutdown what it saves the start, and a run's snapshots are unchanged.
const (
	shutdownSnapshotFraction = 0.1
	shutdownSnapshotMin      = 64 << 20
)

func (c *Cluster) snapshotBeforeShutdown() {
	// Shutting down, a snapshot in progress or this one serves no one.
	c.snapshotUnpaced.Store(true)
	if c.fsm == nil || c.raft == nil || c.cfg.SnapshotLogFraction == 0 {
		return
	}
	since := c.fsm.LogBytesSinceSnapshot()
	if since < shutdownSnapshotMin || float64(since) < shutdownSnapshotFraction*float64(c.fsm.SnapshotState()) {
		return
	}
	start := time.Now()
	if err := c.snapshotNow().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		c.logger.Warn("snapshot before shutdown", "error", err)
		return
	}
	c.logger.Info("snapshot before shutdown: the next start replays no log", "log_bytes", since, "took", time.Since(start))
}

// The log a snapshot leaves behind. Raft counts it in entries
// (TrailingLogs, 10,240 by default), but the leader's group commit packs
// up to 512 commands in one entry, so 10,240 entries of 1,000-event
// appends are 3 GB of log kept beside the state forever. A follower
// briefly behind needs far less: the next snapshot keeps the entries that
// make up about trailingLogBytes of log at the average entry size since
// the last one, never fewer than minTrailingLogs (64) nor more than the
// configured TrailingLogs.
const (
	trailingLogBytes = 64 << 20
	minTrailingLogs  = 64
)

// trailingLogs is the entry count that keeps about trailingLogBytes of a
// log whose entries average logBytes/entries, within [minTrailingLogs,
// configured].
func trailingLogs(entries, logBytes, configured uint64) uint64 {
	if entries == 0 || logBytes == 0 {
		return configured
	}
	avg := max(logBytes/entries, 1)
	n := max(uint64(trailingLogBytes)/avg, minTrailingLogs)
	return min(n, configured)
}

// snapshotNow takes a snapshot, keeping a trailing log of about
// trailingLogBytes.
func (c *Cluster) snapshotNow() raft.SnapshotFuture {
	if c.fsm != nil {
		if last, applied := c.fsm.SnapshotIndex(), c.fsm.AppliedIndex(); applied > last {
			c.boundTrailingLog(applied - last)
		}
	}
	return c.raft.Snapshot()
}

// boundTrailingLog sets Raft's TrailingLogs for the next snapshot from
// the log since the last one (entries long).
func (c *Cluster) boundTrailingLog(entries uint64) {
	configured := orU64(c.cfg.TrailingLogs, DefaultTrailingLogs)
	rc := c.raft.ReloadableConfig()
	want := trailingLogs(entries, c.fsm.LogBytesSinceSnapshot(), configured)
	if rc.TrailingLogs == want {
		return
	}
	rc.TrailingLogs = want
	if err := c.raft.ReloadConfig(rc); err != nil {
		c.logger.Warn("bound the trailing log", "entries", want, "error", err)
	}
}
