package cluster

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// The bootstrap decision (bootstrap.go): a voter started with
// --bootstrap-expect N forms a new cluster once N alive voters that agree
// on N see each other in gossip and none reports existing Raft state. Each
// test runs the real loop over an in-memory Raft node and a real gossip
// agent on loopback whose registry holds the other members as gossip
// would report them.

// syncBuffer is a log sink the loop and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type bootRig struct {
	c    *Cluster
	node *memNode
	logs *syncBuffer
	done chan struct{} // closed when the loop returns
}

// peer is another server as gossip reports it.
func peer(name, status string, voter bool, expect int) Member {
	return Member{Name: name, Status: status, Meta: NodeMeta{RaftAddr: "raft-" + name, Voter: voter, Expect: expect}}
}

// startBootstrap runs the bootstrap loop of node "n2" with the given
// expectation and suffrage, seeing the given peers. seed, if any, is Raft
// state the node already has in its log.
func startBootstrap(t *testing.T, expect int, voter, hasState bool, peers []Member, seed ...*raft.Log) *bootRig {
	t.Helper()
	logs := &syncBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
	node := newMemNode(t, "n2", nopFSM{}, nil, seed...)
	cfg := Config{Name: "n2", GossipAddr: "127.0.0.1:0", BootstrapExpect: expect, Voter: voter, Logger: logger}
	g, err := newGossip(&cfg, NodeMeta{RaftAddr: string(node.addr), Expect: expect, Voter: voter, Bootstrapped: hasState})
	if err != nil {
		t.Fatalf("gossip: %v", err)
	}
	t.Cleanup(func() { g.shutdown() })
	waitFor(t, "gossip lists the node itself", func() bool { _, ok := g.member("n2"); return ok })
	for _, p := range peers {
		setMember(g, p)
	}
	c := &Cluster{cfg: cfg, logger: logger, raft: node.raft, gossip: g, shutdownCh: make(chan struct{})}
	rig := &bootRig{c: c, node: node, logs: logs, done: make(chan struct{})}
	c.wg.Add(1)
	go func() { c.bootstrapLoop(hasState); close(rig.done) }()
	t.Cleanup(func() { close(c.shutdownCh); <-rig.done })
	return rig
}

// servers lists the Raft configuration's server ids, sorted ("" when the
// node has none: not bootstrapped).
func (r *bootRig) servers(t *testing.T) string {
	var ids []string
	for id, s := range configuration(t, r.node.raft) {
		addr := raft.ServerAddress("raft-" + id) // what gossip advertised
		if id == "n2" {
			addr = r.node.addr
		}
		if s.Suffrage != raft.Voter || s.Address != addr {
			t.Fatalf("server %s in the configuration: %+v, want a voter at %s", id, s, addr)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

func (r *bootRig) bootstrapped() bool {
	r.c.gossip.metaMu.Lock()
	defer r.c.gossip.metaMu.Unlock()
	return r.c.gossip.meta.Bootstrapped
}

// wantBootstrap waits until the node bootstrapped with exactly servers,
// announced it in gossip and left the loop.
func (r *bootRig) wantBootstrap(t *testing.T, servers string) {
	t.Helper()
	waitFor(t, "bootstrap with "+servers, func() bool { return r.servers(t) != "" })
	if got := r.servers(t); got != servers {
		t.Fatalf("bootstrapped with %s, want %s", got, servers)
	}
	waitFor(t, "the loop returns", func() bool {
		select {
		case <-r.done:
			return true
		default:
			return false
		}
	})
	if !r.bootstrapped() {
		t.Fatal("bootstrapped, but gossip metadata does not say so")
	}
}

// wantNoBootstrap checks that three polls of the loop pass without a
// bootstrap.
func (r *bootRig) wantNoBootstrap(t *testing.T) {
	t.Helper()
	holds(t, 3*bootstrapPoll, "a bootstrap", func() bool { return r.servers(t) != "" })
	if r.bootstrapped() {
		t.Fatal("gossip metadata says bootstrapped")
	}
}

func TestBootstrapExpect(t *testing.T) {
	tests := []struct {
		name  string
		peers []Member
		// then, if set, changes gossip after a first check that nothing
		// was bootstrapped.
		then []Member
		want string // the servers bootstrapped with in the end; "" = none
	}{
		{name: "three voters expecting three, sorted by name",
			peers: []Member{peer("n3", StatusAlive, true, 3), peer("n1", StatusAlive, true, 3)}, want: "n1,n2,n3"},
		{name: "a voter with no expectation counts",
			peers: []Member{peer("n1", StatusAlive, true, 0), peer("n3", StatusAlive, true, 3)}, want: "n1,n2,n3"},
		{name: "more alive voters than expected join the configuration",
			peers: []Member{peer("n1", StatusAlive, true, 3), peer("n3", StatusAlive, true, 3), peer("n4", StatusAlive, true, 3)},
			want:  "n1,n2,n3,n4"},
		{name: "non-voters neither count nor join",
			peers: []Member{peer("n1", StatusAlive, true, 3), peer("n0", StatusAlive, false, 3)},
			then:  []Member{peer("n3", StatusAlive, true, 3)}, want: "n1,n2,n3"},
		{name: "suspect members do not count until alive",
			peers: []Member{peer("n1", StatusAlive, true, 3), peer("n3", StatusSuspect, true, 3)},
			then:  []Member{peer("n3", StatusAlive, true, 3)}, want: "n1,n2,n3"},
		{name: "dead and left members do not count",
			peers: []Member{peer("n1", StatusDead, true, 3), peer("n3", StatusLeft, true, 3), peer("n4", StatusAlive, true, 3)},
			then:  []Member{peer("n5", StatusAlive, true, 3)}, want: "n2,n4,n5"},
		{name: "an alive member with Raft state means a cluster exists: wait to be added",
			peers: []Member{peer("n1", StatusAlive, true, 3), peer("n3", StatusAlive, true, 3), func() Member {
				m := peer("n4", StatusAlive, true, 3)
				m.Meta.Bootstrapped = true
				return m
			}()},
			then: []Member{peer("n4", StatusDead, true, 3)}, want: "n1,n2,n3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rig := startBootstrap(t, 3, true, false, tt.peers)
			if tt.then != nil {
				rig.wantNoBootstrap(t)
				for _, m := range tt.then {
					setMember(rig.c.gossip, m)
				}
			}
			rig.wantBootstrap(t, tt.want)
		})
	}
}

// Members that disagree on the expectation stop the bootstrap, and the
// node says why; once they agree it proceeds.
func TestBootstrapExpectDisagreement(t *testing.T) {
	rig := startBootstrap(t, 3, true, false, []Member{peer("n1", StatusAlive, true, 5), peer("n3", StatusAlive, true, 3)})
	waitFor(t, "the disagreement is logged", func() bool {
		return strings.Contains(rig.logs.String(), "members disagree on bootstrap-expect; not bootstrapping")
	})
	if got := rig.servers(t); got != "" {
		t.Fatalf("bootstrapped with %s despite the disagreement", got)
	}
	if log := rig.logs.String(); !strings.Contains(log, "member=n1") || !strings.Contains(log, "theirs=5") || !strings.Contains(log, "ours=3") {
		t.Fatalf("the log does not name the member and both expectations:\n%s", log)
	}
	setMember(rig.c.gossip, peer("n1", StatusAlive, true, 3))
	rig.wantBootstrap(t, "n1,n2,n3")
}

// Nodes that must never bootstrap: one with no expectation (it joins an
// existing cluster) and a non-voter, however many voters they see.
func TestBootstrapNeverWithoutExpectOrVote(t *testing.T) {
	peers := []Member{peer("n1", StatusAlive, true, 3), peer("n3", StatusAlive, true, 3)}
	for _, tt := range []struct {
		name   string
		expect int
		voter  bool
	}{{"expect 0", 0, true}, {"non-voter", 3, false}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rig := startBootstrap(t, tt.expect, tt.voter, false, peers)
			rig.wantNoBootstrap(t)
		})
	}
}

// A node that already has Raft state never bootstraps: with state from its
// own disk (the loop returns at once) or with entries a leader replicated
// to it (the loop announces it in gossip and returns).
func TestBootstrapWithRaftState(t *testing.T) {
	peers := []Member{peer("n1", StatusAlive, true, 3), peer("n3", StatusAlive, true, 3)}
	t.Run("state on disk", func(t *testing.T) {
		rig := startBootstrap(t, 3, true, true, peers)
		<-rig.done
		if got := rig.servers(t); got != "" {
			t.Fatalf("bootstrapped with %s", got)
		}
	})
	t.Run("added by a leader", func(t *testing.T) {
		rig := startBootstrap(t, 3, true, false, peers, &raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte{0x80}})
		waitFor(t, "the loop returns", func() bool {
			select {
			case <-rig.done:
				return true
			default:
				return false
			}
		})
		if !rig.bootstrapped() {
			t.Fatal("gossip metadata does not say the node has Raft state")
		}
		if got := rig.servers(t); got != "" {
			t.Fatalf("bootstrapped with %s", got)
		}
	})
}
