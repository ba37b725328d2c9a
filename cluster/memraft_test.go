package cluster

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// In-memory Raft nodes for the cluster-only unit tests (bootstrap,
// reconcile, applier): raft.NewInmemStore and raft.NewInmemTransport, no
// sockets, no disk. Gossip is faked by writing the member registry that
// memberlist's events would fill (setMember).

// memNode is one in-memory Raft server.
type memNode struct {
	id    string
	addr  raft.ServerAddress
	raft  *raft.Raft
	trans *raft.InmemTransport
	store *raft.InmemStore
}

// memConfig is a Raft configuration quick enough for in-memory tests and
// slow enough not to flap on a loaded two-core machine.
func memConfig(id string) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(id)
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.ShutdownOnRemove = false
	c.Logger = hclog.NewNullLogger()
	return c
}

// newMemNode starts a Raft server with no configuration (not bootstrapped)
// over fsm, its log holding seed. tune, if not nil, adjusts its
// configuration first.
func newMemNode(t *testing.T, id string, fsm raft.FSM, tune func(*raft.Config), seed ...*raft.Log) *memNode {
	t.Helper()
	conf := memConfig(id)
	if tune != nil {
		tune(conf)
	}
	store := raft.NewInmemStore()
	if err := store.StoreLogs(seed); err != nil {
		t.Fatal(err)
	}
	addr, trans := raft.NewInmemTransport("")
	r, err := raft.NewRaft(conf, fsm, store, store, raft.NewInmemSnapshotStore(), noPipeline{trans})
	if err != nil {
		t.Fatalf("NewRaft %s: %v", id, err)
	}
	t.Cleanup(func() { r.Shutdown().Error() })
	return &memNode{id: id, addr: addr, raft: r, trans: trans, store: store}
}

// noPipeline is the in-memory transport without pipelined replication, as
// the fleet runs Raft (setupRaft: MaxRPCsInFlight 1).
type noPipeline struct{ *raft.InmemTransport }

func (noPipeline) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// server is n as a voter of a configuration.
func (n *memNode) server() raft.Server {
	return raft.Server{ID: raft.ServerID(n.id), Address: n.addr, Suffrage: raft.Voter}
}

// connect makes every node reachable from every other.
func connect(nodes ...*memNode) {
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				a.trans.Connect(b.addr, b.trans)
			}
		}
	}
}

// newLeader bootstraps nodes[0] alone and waits until it leads; the other
// nodes are connected to it, unconfigured, ready to be added.
func newLeader(t *testing.T, nodes ...*memNode) {
	t.Helper()
	connect(nodes...)
	if err := nodes[0].raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{nodes[0].server()}}).Error(); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	waitFor(t, nodes[0].id+" leads", func() bool { return nodes[0].raft.State() == raft.Leader })
}

// configuration is r's current Raft configuration by server id.
func configuration(t *testing.T, r *raft.Raft) map[string]raft.Server {
	t.Helper()
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatalf("GetConfiguration: %v", err)
	}
	out := map[string]raft.Server{}
	for _, s := range f.Configuration().Servers {
		out[string(s.ID)] = s
	}
	return out
}

// waitFor polls cond until it holds, failing the test after 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holds checks that cond stays false for d, polling; used only for "this
// must not happen" around a loop whose period is known, and always followed
// in the same test by the change that makes it happen.
func holds(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			t.Fatalf("happened, but must not: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// setMember writes a member into g's registry as memberlist's event
// delegate would, and wakes whoever waits on gossip events.
func setMember(g *gossip, m Member) {
	g.mu.Lock()
	g.members[m.Name] = &m
	g.mu.Unlock()
	select {
	case g.events <- struct{}{}:
	default:
	}
}

// bareGossip is a member registry without memberlist: enough for code that
// only reads Members (reconcile).
func bareGossip(name string, meta NodeMeta) *gossip {
	g := &gossip{logger: hclog.NewNullLogger(), name: name, meta: meta,
		members: map[string]*Member{}, events: make(chan struct{}, 1)}
	setMember(g, Member{Name: name, Status: StatusAlive, Meta: meta})
	return g
}

// nopFSM is a raft.FSM that keeps nothing.
type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) interface{}         { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnapshot{}, nil }
func (nopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type nopSnapshot struct{}

func (nopSnapshot) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnapshot) Release()                          {}
