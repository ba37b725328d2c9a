package cluster

import (
	"math"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Config describes one fak server in the cluster.
type Config struct {
	// Name is the node's stable identity: its Raft server id and gossip name.
	Name    string
	DataDir string

	// RaftAddr, GossipAddr: host:port to bind and advertise. Port 0 picks a
	// free port (tests).
	RaftAddr   string
	GossipAddr string
	// AdvertiseRaft, AdvertiseGossip: addresses peers reach this node at
	// when they differ from the bound ones (NAT, containers, a proxy in
	// between). Empty: the bound address.
	AdvertiseRaft   string
	AdvertiseGossip string
	// APIAddr is advertised in gossip metadata so peers can forward writes.
	APIAddr string

	// BootstrapExpect: form a new cluster once this many servers see each
	// other in gossip (0 = never bootstrap; join an existing cluster).
	BootstrapExpect int
	// Join lists gossip addresses of existing members.
	Join []string
	// Voter false joins as a Raft non-voter.
	Voter bool

	// DeadServerGrace: a server dead in gossip this long is removed from the
	// Raft configuration (while quorum allows).
	DeadServerGrace time.Duration

	// GossipKeys encrypt and authenticate gossip (AES, 16/24/32 bytes): the
	// first encrypts, all decrypt, so a key is rotated by adding it second
	// everywhere, then making it first, then dropping the old one. Empty:
	// gossip in the clear.
	GossipKeys [][]byte
	// TLS, when set, makes Raft mutual TLS between nodes of one CA.
	TLS *NodeTLS

	// Raft tuning; zero values take the defaults of DefaultRaftConfig.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// SnapshotLogFraction > 0 amortises snapshots (snapshot_policy.go): one
	// is taken only once the log since the last holds this fraction of the
	// state's size (and SnapshotThreshold entries). 0: every
	// SnapshotThreshold entries, Raft's own rule.
	SnapshotLogFraction float64
	// SnapshotRate paces the copy of a snapshot a node takes while it
	// serves, in bytes a second (snapshot_pace.go); 0: unpaced (the agent
	// defaults to DefaultSnapshotRate).
	SnapshotRate int64

	// Observer receives apply, batch and snapshot measurements (nil: none).
	Observer Observer

	// OnStorageFull is called, after its one line is logged, when a write
	// of the FSM database, the Raft log or a snapshot fails for a full
	// disk or quota (storage.go). The agent ends the process there; nil:
	// the node stays up, its FSM stopped, and never ready.
	OnStorageFull func(*StorageError)
	// StoreFault, for tests, is asked before each write of what (StoreFSM,
	// StoreLog): an error fails that write as the disk would, and it may
	// block to hold the write back. Nil in production.
	StoreFault func(what string) error

	Logger hclog.Logger
}

// Raft timeouts for a LAN fleet. The library defaults (1 s heartbeat and
// election timeouts) are sized for WANs; Consul and Vault even multiply them
// by 5. A fak fleet sits on one LAN (or loopback), where a round trip is well
// under a millisecond, so 500 ms still gives a follower 10 missed heartbeats
// (sent every HeartbeatTimeout/10) before it campaigns — a busy 2-core host
// with GC pauses does not get near that — while a dead leader is replaced in
// about 0.5–1 s instead of 1–2 s. CommitTimeout bounds how long followers
// wait to learn a new commit index when no new entries flow; 5 ms keeps
// follower reads (read index) fast at the cost of ~200 tiny RPCs/s per idle
// follower.
const (
	HeartbeatTimeout   = 500 * time.Millisecond
	ElectionTimeout    = 500 * time.Millisecond
	LeaderLeaseTimeout = 250 * time.Millisecond
	CommitTimeout      = 5 * time.Millisecond
	// MaxAppendEntries bounds entries per AppendEntries RPC and per FSM
	// ApplyBatch call; each entry already carries many coalesced commands.
	MaxAppendEntries = 128

	DefaultSnapshotThreshold = 16384
	DefaultSnapshotInterval  = 30 * time.Second
	DefaultTrailingLogs      = 10240
	// DefaultSnapshotLogFraction: a snapshot once the log since the last
	// is as large as the state that one copied, so the bytes all snapshots
	// write stay within about twice the final state (1 + 1/2 + 1/4 + …).
	DefaultSnapshotLogFraction = 1.0
	DefaultDeadServerGrace     = 2 * time.Minute
	// DefaultSnapshotRate: at 16 MiB/s three nodes snapshotting a 110 MB
	// state together kept the p99 of writes in that time within 1.4–1.5×
	// of the p99 outside it (32 MiB/s: 1.7×, unpaced: 16–20×), for
	// 14–16 s a snapshot. The copy's CPU and disk are background work;
	// what waits for it is only the log's compaction.
	DefaultSnapshotRate = 16 << 20

	// logCacheSize: the last entries kept decoded for replication, which
	// reads back what was just appended. An entry carries a batch of
	// commands (28 KB on average under a 64-client load), so 512 of them
	// were over half of an idle node's live heap.
	logCacheSize = 128
	// snapshotsRetained: one. The node's state is already durable in
	// fsm.db (persisted with its applied index and checked on every
	// start), so the newest snapshot is a second copy of it on this node;
	// an older one would be a third, a full copy of every journal
	// (incompressible text kept two: 2.16x the journals' size on disk,
	// one: 1.87x). The older one was a fallback for a damaged newest
	// snapshot; the fleet's other nodes are that fallback now: a node
	// that can load neither is removed (`fakctl operator raft
	// remove-peer`) and rejoins with an empty data directory.
	snapshotsRetained = 1
	// raftTimeout bounds one transport I/O and membership changes.
	raftTimeout = 10 * time.Second
	maxPool     = 3
)

func (c *Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.Name)
	rc.HeartbeatTimeout = HeartbeatTimeout
	rc.ElectionTimeout = ElectionTimeout
	rc.LeaderLeaseTimeout = LeaderLeaseTimeout
	rc.CommitTimeout = CommitTimeout
	rc.MaxAppendEntries = MaxAppendEntries
	// The applier bounds its own waits with contexts, so the broken enqueue
	// timeout of BatchApplyCh does not matter (Vault does the same).
	rc.BatchApplyCh = true
	rc.ShutdownOnRemove = false
	rc.SnapshotThreshold = orU64(c.SnapshotThreshold, DefaultSnapshotThreshold)
	if c.SnapshotLogFraction > 0 {
		rc.SnapshotThreshold = math.MaxUint64 / 2 // snapshotLoop decides
	}
	rc.SnapshotInterval = orDur(c.SnapshotInterval, DefaultSnapshotInterval)
	rc.TrailingLogs = orU64(c.TrailingLogs, DefaultTrailingLogs)
	rc.Logger = c.Logger.Named("raft")
	return rc
}

func orU64(v, d uint64) uint64 {
	if v == 0 {
		return d
	}
	return v
}

func orDur(v, d time.Duration) time.Duration {
	if v == 0 {
		return d
	}
	return v
}
