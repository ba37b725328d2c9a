package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/fak-dev/fak/fsm"
)

// Cluster is one fak server's membership in the fleet: its Raft node, its
// gossip agent and the loops that keep the two in agreement.
type Cluster struct {
	cfg    Config
	logger hclog.Logger
	fsm    *fsm.FSM

	raft      *raft.Raft
	transport *raft.NetworkTransport
	logStore  logStore
	// snapshots is Raft's snapshot store, read by VerifyReplay.
	snapshots raft.SnapshotStore
	// snapshotUnpaced: snapshots are written as fast as they can be (the
	// one before a clean shutdown), not at SnapshotRate.
	snapshotUnpaced atomic.Bool
	gossip          *gossip
	// gossipRef is gossip for Raft's transport goroutines, which may ask
	// ServerAddr before New has finished.
	gossipRef atomic.Pointer[gossip]
	applier   *applier
	notifyCh  chan bool
	// verifying is held by the one VerifyReplay running on this node.
	verifying sync.Mutex
	// storage records the outcome of this node's writes (storage.go).
	storage storage

	// ready is true while this node leads and its FSM has caught up with
	// everything committed before its term (Barrier after election).
	ready atomic.Bool

	shutdownCh chan struct{}
	// raftDown closes once Raft has shut down (awaitFuture).
	raftDown chan struct{}
	// nudges carries requests for a commit nudge to the leader's nudger
	// (nudge.go).
	nudges       chan struct{}
	shutdownOnce sync.Once
	wg           sync.WaitGroup
}

// ErrNotLeader: this node cannot serve the request as leader (it is a
// follower, has not finished its leadership barrier, or lost leadership
// before the command entered the log). Safe to retry anywhere.
var ErrNotLeader = errors.New("not the leader")

// ErrShutdown: the node is shutting down.
var ErrShutdown = errors.New("node is shutting down")

// New starts Raft and gossip for one server. The FSM must be freshly opened;
// Raft restores its latest snapshot and replays the log after it.
func New(cfg Config, f *fsm.FSM) (*Cluster, error) {
	if cfg.Name == "" {
		return nil, errors.New("node name is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.DeadServerGrace == 0 {
		cfg.DeadServerGrace = DefaultDeadServerGrace
	}
	c := &Cluster{cfg: cfg, logger: cfg.Logger, fsm: f, shutdownCh: make(chan struct{}), raftDown: make(chan struct{}), nudges: make(chan struct{}, 1)}
	c.storage.c = c
	if f != nil {
		c.storage.watchFSM(f)
	}
	if err := c.setupRaft(); err != nil {
		return nil, err
	}
	if f != nil {
		f.SetSnapshotVoters(c.voterIDs)
	}
	hasState := c.raft.LastIndex() > 0
	g, err := newGossip(&c.cfg, NodeMeta{
		APIAddr:      cfg.APIAddr,
		RaftAddr:     string(c.transport.LocalAddr()),
		Expect:       cfg.BootstrapExpect,
		Voter:        cfg.Voter,
		Bootstrapped: hasState,
	})
	if err != nil {
		c.raft.Shutdown().Error()
		c.transport.Close()
		c.logStore.Close()
		return nil, err
	}
	c.gossip = g
	c.gossipRef.Store(g)
	c.applier = newApplier(c.raft, c.raftDown, c.logger.Named("applier"), c.cfg.observer())

	c.wg.Add(2)
	go c.monitorLeadership()
	go c.bootstrapLoop(hasState)
	if cfg.SnapshotLogFraction > 0 && f != nil {
		c.wg.Add(1)
		go c.snapshotLoop()
	}
	return c, nil
}

func (c *Cluster) setupRaft() error {
	raftDir := filepath.Join(c.cfg.DataDir, "raft")
	if err := os.MkdirAll(raftDir, 0o700); err != nil {
		return fmt.Errorf("create raft dir: %w", err)
	}
	opened, err := openLogStore(raftDir, c.logger)
	if err != nil {
		return err
	}
	store := &watchedLogStore{logStore: opened, s: &c.storage, dir: filepath.Join(raftDir, walDirName)}
	cache, err := raft.NewLogCache(logCacheSize, store)
	if err != nil {
		store.Close()
		return err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(raftDir, snapshotsRetained, c.logger.Named("snapshot"))
	if err != nil {
		store.Close()
		return fmt.Errorf("open snapshot store: %w", err)
	}
	layer, err := newTCPStreamLayer(c.cfg.RaftAddr, c.cfg.AdvertiseRaft, c.cfg.TLS)
	if err != nil {
		store.Close()
		return err
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  layer,
		MaxPool: maxPool,
		// No pipelined replication: its netPipeline can deadlock once a
		// follower answers an AppendEntries with Success=false (routine
		// after an election or a leadership transfer): the send loop parks
		// on a full in-progress channel while the decoder parks on a done
		// channel nobody reads, so replication to that follower stops and
		// raft.Shutdown never returns. HashiCorp measured pipelining to
		// bring next to nothing with batching (hashicorp/raft#541).
		MaxRPCsInFlight:       1,
		Timeout:               raftTimeout,
		Logger:                c.logger.Named("raft-net"),
		ServerAddressProvider: c,
	})
	rc := c.cfg.raftConfig()
	if err := c.continueKept(rc, store, snaps); err != nil {
		trans.Close()
		store.Close()
		return err
	}
	notify := make(chan bool, 10)
	rc.NotifyCh = notify
	r, err := raft.NewRaft(rc, c.raftFSM(), cache, store, snaps, trans)
	if err != nil {
		trans.Close()
		store.Close()
		return fmt.Errorf("start raft: %w", err)
	}
	c.raft, c.transport, c.logStore, c.snapshots = r, trans, store, snaps
	c.notifyCh = notify
	return nil
}

// ServerAddr implements raft.ServerAddressProvider: Raft dials by stable id,
// resolved through gossip, so a node whose address changed stays reachable.
// When gossip does not know the id, Raft falls back to the address in its
// configuration.
func (c *Cluster) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if g := c.gossipRef.Load(); g != nil {
		if m, ok := g.member(string(id)); ok && m.Meta.RaftAddr != "" {
			return raft.ServerAddress(m.Meta.RaftAddr), nil
		}
	}
	return "", fmt.Errorf("server %s unknown to gossip", id)
}

// Name is the node's name (its Raft server id).
func (c *Cluster) Name() string { return c.cfg.Name }

// RaftAddr and GossipAddr are the advertised addresses actually bound.
func (c *Cluster) RaftAddr() string   { return string(c.transport.LocalAddr()) }
func (c *Cluster) GossipAddr() string { return c.gossip.Addr() }

// Raft exposes the Raft node to tests and status reporting.
func (c *Cluster) Raft() *raft.Raft { return c.raft }

// Join joins gossip through the given addresses of existing members.
func (c *Cluster) Join(addrs []string) (int, error) { return c.gossip.join(addrs) }

// IsLeader reports whether this node leads and is ready to serve.
func (c *Cluster) IsLeader() bool {
	return c.ready.Load() && c.raft.State() == raft.Leader
}

// Leader returns the current leader's id and API address ("" if unknown).
func (c *Cluster) Leader() (id, apiAddr string) {
	_, lid := c.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	if string(lid) == c.cfg.Name {
		return c.cfg.Name, c.cfg.APIAddr
	}
	if m, ok := c.gossip.member(string(lid)); ok {
		return string(lid), m.Meta.APIAddr
	}
	return string(lid), ""
}

// Members is the gossip view, every member ever seen this run.
func (c *Cluster) Members() []Member { return c.gossip.Members() }

// Peer is one server of the Raft configuration.
type Peer struct {
	ID      string
	Address string
	Voter   bool
	Leader  bool
}

// Peers returns the Raft configuration as this node knows it.
func (c *Cluster) Peers() ([]Peer, error) {
	future := c.raft.GetConfiguration()
	if err := future.Error(); err != nil {
		return nil, err
	}
	_, lid := c.raft.LeaderWithID()
	var out []Peer
	for _, s := range future.Configuration().Servers {
		out = append(out, Peer{
			ID: string(s.ID), Address: string(s.Address),
			Voter: s.Suffrage == raft.Voter, Leader: s.ID == lid,
		})
	}
	return out, nil
}

// Status is this node's Raft status.
type Status struct {
	Name, State, LeaderID, LeaderAPIAddr string
	Term, LastLogIndex, CommitIndex      uint64
	AppliedIndex                         uint64
}

func (c *Cluster) Status() Status {
	lid, laddr := c.Leader()
	return Status{
		Name: c.cfg.Name, State: c.raft.State().String(),
		LeaderID: lid, LeaderAPIAddr: laddr,
		Term: c.raft.CurrentTerm(), LastLogIndex: c.raft.LastIndex(),
		CommitIndex: c.raft.CommitIndex(), AppliedIndex: c.fsm.AppliedIndex(),
	}
}

// Shutdown stops gossip and Raft without leaving: the node stays in the Raft
// configuration and rejoins with its state when restarted.
func (c *Cluster) Shutdown() error {
	var err error
	c.shutdownOnce.Do(func() {
		c.snapshotBeforeShutdown()
		close(c.shutdownCh)
		c.ready.Store(false)
		if e := c.gossip.shutdown(); e != nil {
			err = e
		}
		// Raft first: its shutdown answers every future its loop took, and
		// raftDown ends the wait on any it never took (awaitFuture), so the
		// applier's loops can drain even when the cluster has no quorum.
		if e := c.raft.Shutdown().Error(); e != nil && err == nil {
			err = e
		}
		close(c.raftDown)
		c.applier.stop()
		c.wg.Wait()
		c.transport.Close()
		if e := c.logStore.Close(); e != nil && err == nil {
			err = e
		}
	})
	return err
}
