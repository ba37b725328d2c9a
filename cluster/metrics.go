package cluster

import (
	"io"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fak-dev/fak/fsm"
)

// Observer receives measurements of the replication path. The cluster
// package only measures; how the numbers are exported (Prometheus, in
// node/metrics.go) is the observer's business, so cluster/ depends on no
// metrics library. Methods run on hot paths (the applier, Raft's FSM and
// snapshot goroutines): they must be cheap and must not block.
type Observer interface {
	// ObserveApply: one command proposed on the leader took d from submit
	// to its result (commit and FSM apply included), err its outcome.
	ObserveApply(d time.Duration, err error)
	// ObserveEntry: the leader proposed a Raft entry of n coalesced commands.
	ObserveEntry(commands int)
	// ObserveFSMBatch: Raft handed the FSM n log entries in one ApplyBatch.
	ObserveFSMBatch(entries int)
	// ObserveSnapshot: an FSM snapshot of size bytes was persisted in d
	// (err non-nil: it failed, size is what was written).
	ObserveSnapshot(d time.Duration, size int64, err error)
	// ObserveCommitNudge: the leader appended an empty entry so followers
	// learn a commit their runner waits for (nudge.go); err its outcome.
	ObserveCommitNudge(err error)
}

// nopObserver is used when Config.Observer is nil.
type nopObserver struct{}

func (nopObserver) ObserveApply(time.Duration, error)           {}
func (nopObserver) ObserveEntry(int)                            {}
func (nopObserver) ObserveFSMBatch(int)                         {}
func (nopObserver) ObserveSnapshot(time.Duration, int64, error) {}
func (nopObserver) ObserveCommitNudge(error)                    {}

func (c *Config) observer() Observer {
	if c.Observer == nil {
		return nopObserver{}
	}
	return c.Observer
}

// observedFSM is the FSM as Raft sees it: the same FSM, with ApplyBatch
// sizes and snapshot persistence measured (for the observer, if any) and
// snapshots paced (snapshot_pace.go).
type observedFSM struct {
	*fsm.FSM
	obs  Observer
	pace func(raft.SnapshotSink) raft.SnapshotSink
}

// raftFSM is what setupRaft hands to Raft.
func (c *Cluster) raftFSM() raft.FSM {
	if c.fsm == nil {
		return c.fsm
	}
	return &observedFSM{FSM: c.fsm, obs: c.cfg.observer(), pace: c.paceSnapshot}
}

// paceSnapshot is the sink a snapshot's copy is written through.
func (c *Cluster) paceSnapshot(sink raft.SnapshotSink) raft.SnapshotSink {
	sink = &watchedSink{SnapshotSink: sink, s: &c.storage, dir: filepath.Join(c.cfg.DataDir, "raft", "snapshots")}
	return newPacedSink(sink, c.cfg.SnapshotRate, &c.snapshotUnpaced, filepath.Join(c.cfg.DataDir, "raft", "snapshots"))
}

func (o *observedFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	o.obs.ObserveFSMBatch(len(logs))
	return o.FSM.ApplyBatch(logs)
}

func (o *observedFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := o.FSM.Snapshot()
	if err != nil {
		return nil, err
	}
	return &observedSnapshot{FSMSnapshot: s, obs: o.obs, pace: o.pace}, nil
}

type observedSnapshot struct {
	raft.FSMSnapshot
	obs  Observer
	pace func(raft.SnapshotSink) raft.SnapshotSink
}

// Persist measures the streaming of the snapshot, the costly part (taking
// it is a read transaction).
func (s *observedSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	cs := &countingSink{SnapshotSink: s.pace(sink)}
	err := s.FSMSnapshot.Persist(cs)
	s.obs.ObserveSnapshot(time.Since(start), cs.n, err)
	return err
}

type countingSink struct {
	raft.SnapshotSink
	n int64
}

func (c *countingSink) Write(p []byte) (int, error) {
	n, err := c.SnapshotSink.Write(p)
	c.n += int64(n)
	return n, err
}

// PaceState hands a compressed snapshot's pace to the paced sink below.
func (c *countingSink) PaceState(n int) {
	if p, ok := c.SnapshotSink.(fsm.StatePacer); ok {
		p.PaceState(n)
	}
}

var (
	_ raft.BatchingFSM = (*observedFSM)(nil)
	_ io.Writer        = (*countingSink)(nil)
)
