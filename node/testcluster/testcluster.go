// Package testcluster runs real fak fleets inside a test process: N nodes
// with real Raft over loopback TCP, real gossip, real bbolt files under
// t.TempDir() and the real Connect API, plus helpers to find the leader,
// stop and restart nodes and wait on conditions with deadlines. Later
// issues reuse it for their cluster tests.
package testcluster

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"

	"github.com/fak-dev/fak/api"
	"github.com/fak-dev/fak/api/apiclient"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/internal/freeport"
	"github.com/fak-dev/fak/node"
)

// Token is the bearer token every test fleet accepts.
const Token = "test-token"

// Options tune a test fleet.
type Options struct {
	// Nodes in the fleet (default 3), all voters bootstrapping together.
	Nodes int
	// Raft snapshot tuning (0 = production defaults).
	SnapshotThreshold uint64
	TrailingLogs      uint64
	DeadServerGrace   time.Duration
	MaxEventBytes     int
	// EchoTurn is the echo adapter's turn length (0: the node default,
	// 1s; tests usually want 50-100ms).
	EchoTurn time.Duration
	// LeaseTTL and AttachmentTTL shorten the API's lifetimes (0: defaults).
	LeaseTTL      time.Duration
	AttachmentTTL time.Duration
	// LogLevel for node logs written to t.Log (default "warn").
	LogLevel string
	// RecoverAfter: how long a node is dead in gossip before its sessions
	// are recovered on the others (0: the node default, 30s).
	RecoverAfter time.Duration
	// Configure, when set, adjusts each node's configuration before it
	// starts (capabilities, labels, ...).
	Configure func(name string, cfg *node.Config)
	// GossipKeys encrypt the fleet's gossip (base64, first is primary).
	GossipKeys []string
	// TLS runs the fleet with mutual TLS: a CA made for the test issues
	// each node a certificate, and the fleet's clients present a client
	// certificate (see TLS.go).
	TLS bool
}

// Node is one member of a test fleet, running or stopped.
type Node struct {
	Name       string
	DataDir    string
	APIAddr    string
	RaftAddr   string
	GossipAddr string
	Voter      bool
	// Configure, when set, adjusts this node's configuration after
	// Options.Configure (e.g. a wrong gossip key or certificate).
	Configure func(cfg *node.Config)

	mu      sync.Mutex
	running *node.Node
	ran     bool // started at least once: its addresses are known to peers
}

// Running returns the live node, or nil while it is stopped.
func (n *Node) Running() *node.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.running
}

// Cluster is a test fleet.
type Cluster struct {
	t     testing.TB
	opts  Options
	Nodes []*Node
	http  *http.Client
	// tls is the fleet's CA and files when Options.TLS (tls.go).
	tls  *fleetTLS
	logs *testLog
}

// New starts a fleet and waits until it has a ready leader.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "warn"
	}
	c := &Cluster{t: t, opts: opts, logs: &testLog{t: t}}
	// Registered first, so it runs last: after the nodes stopped, a
	// goroutine still winding down logs nowhere.
	t.Cleanup(c.logs.close)
	dir := t.TempDir()
	c.http = c.newHTTPClient(dir)
	for i := 0; i < opts.Nodes; i++ {
		c.Nodes = append(c.Nodes, &Node{
			Name:       fmt.Sprintf("n%d", i+1),
			DataDir:    filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			APIAddr:    freeAddr(t),
			RaftAddr:   freeAddr(t),
			GossipAddr: freeAddr(t),
			Voter:      true,
		})
	}
	for _, n := range c.Nodes {
		c.Start(n)
	}
	t.Cleanup(func() {
		c.checkReplay()
		c.StopAll()
	})
	c.WaitForLeader(30 * time.Second)
	return c
}

// gossipAddrs lists every node's gossip address (the join list).
func (c *Cluster) gossipAddrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.GossipAddr)
	}
	return out
}

// Start starts (or restarts) a node with its data dir and addresses.
func (c *Cluster) Start(n *Node) {
	c.t.Helper()
	expect := c.opts.Nodes
	if !n.Voter {
		expect = 0
	}
	logger := hclog.New(&hclog.LoggerOptions{
		Name: n.Name, Level: hclog.LevelFromString(c.opts.LogLevel), Output: c.logs,
	})
	var running *node.Node
	var err error
	// A port freed by a stopped node can linger briefly; retry the bind.
	deadline := time.Now().Add(10 * time.Second)
	for {
		cfg := node.Config{
			Name: n.Name, DataDir: n.DataDir,
			APIAddr: n.APIAddr, RaftAddr: n.RaftAddr, GossipAddr: n.GossipAddr,
			BootstrapExpect: expect, Join: c.gossipAddrs(), Voter: n.Voter,
			Tokens: []api.Token{api.OperatorToken(Token)}, MaxEventBytes: c.opts.MaxEventBytes,
			EchoTurn: c.opts.EchoTurn, LeaseTTL: c.opts.LeaseTTL, AttachmentTTL: c.opts.AttachmentTTL,
			DeadServerGrace:   c.opts.DeadServerGrace,
			SnapshotThreshold: c.opts.SnapshotThreshold, TrailingLogs: c.opts.TrailingLogs,
			RecoverAfter: c.opts.RecoverAfter,
			Logger:       logger,
		}
		c.secure(n, &cfg)
		if c.opts.Configure != nil {
			c.opts.Configure(n.Name, &cfg)
		}
		if n.Configure != nil {
			n.Configure(&cfg)
		}
		running, err = node.Start(cfg)
		if err == nil || time.Now().After(deadline) {
			break
		}
		// A node that never ran has no address anyone depends on yet (the
		// others' join lists need only one live member), so when another
		// process took one of its ports, it moves to fresh ones.
		if !n.ran && strings.Contains(err.Error(), "address already in use") {
			n.APIAddr, n.RaftAddr, n.GossipAddr = freeAddr(c.t), freeAddr(c.t), freeAddr(c.t)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("start %s: %v", n.Name, err)
	}
	n.mu.Lock()
	n.running = running
	n.ran = true
	n.mu.Unlock()
}

// AddNode starts a new node that joins the running fleet (voter or not).
func (c *Cluster) AddNode(voter bool) *Node {
	c.t.Helper()
	return c.AddNodeWith(voter, nil)
}

// AddNodeWith is AddNode with configure applied to the new node's
// configuration last (Node.Configure).
func (c *Cluster) AddNodeWith(voter bool, configure func(cfg *node.Config)) *Node {
	c.t.Helper()
	i := len(c.Nodes)
	n := &Node{
		Name:       fmt.Sprintf("n%d", i+1),
		DataDir:    filepath.Join(c.t.TempDir(), fmt.Sprintf("n%d", i+1)),
		APIAddr:    freeAddr(c.t),
		RaftAddr:   freeAddr(c.t),
		GossipAddr: freeAddr(c.t),
		Voter:      voter,
		Configure:  configure,
	}
	c.Nodes = append(c.Nodes, n)
	c.Start(n)
	return n
}

// Stop shuts a node down without leaving (a crash as far as the rest of the
// fleet can tell; its data dir stays for Start).
func (c *Cluster) Stop(n *Node) {
	n.mu.Lock()
	r := n.running
	n.running = nil
	n.mu.Unlock()
	if r != nil {
		r.Shutdown()
	}
}

// checkReplay runs every running node's replay-equivalence check at the end
// of a test that passed: whatever the test did, each replica's live state
// must equal its rebuild from snapshot + log (and from the log alone while
// it starts at 1). A check that could not be carried out (a node cut off,
// the log compacted under it) is logged, not failed; a difference fails.
func (c *Cluster) checkReplay() {
	if c.t.Failed() {
		return
	}
	for _, n := range c.Nodes {
		r := n.Running()
		if r == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		rep, err := r.Cluster().VerifyReplay(ctx)
		cancel()
		switch {
		case err != nil:
			c.t.Logf("replay check of %s not carried out: %v", n.Name, err)
		case !rep.Equal:
			c.t.Errorf("replay check: %s's live state (index %d) differs from its rebuild: %+v", n.Name, rep.LiveIndex, rep.Rebuilds)
		}
	}
}

// StopAll stops every running node.
func (c *Cluster) StopAll() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func(n *Node) { defer wg.Done(); c.Stop(n) }(n)
	}
	wg.Wait()
}

// Leader returns the running node that is the ready leader, or nil.
func (c *Cluster) Leader() *Node {
	for _, n := range c.Nodes {
		if r := n.Running(); r != nil && r.Cluster().IsLeader() {
			return n
		}
	}
	return nil
}

// WaitForLeader waits until some running node is the ready leader and every
// running node knows it.
func (c *Cluster) WaitForLeader(timeout time.Duration) *Node {
	c.t.Helper()
	var leader *Node
	c.WaitFor(timeout, "a ready leader known to every running node", func() bool {
		leader = c.Leader()
		if leader == nil {
			return false
		}
		for _, n := range c.Nodes {
			if r := n.Running(); r != nil {
				if id, addr := r.Cluster().Leader(); id != leader.Name || addr == "" {
					return false
				}
			}
		}
		return true
	})
	return leader
}

// Followers returns the running nodes that are not the leader.
func (c *Cluster) Followers() []*Node {
	var out []*Node
	leader := c.Leader()
	for _, n := range c.Nodes {
		if n != leader && n.Running() != nil {
			out = append(out, n)
		}
	}
	return out
}

// WaitFor polls cond every 20 ms until it holds or the timeout expires.
func (c *Cluster) WaitFor(timeout time.Duration, what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Sessions returns a SessionService client for a node's API.
func (c *Cluster) Sessions(n *Node) fakv1connect.SessionServiceClient {
	return fakv1connect.NewSessionServiceClient(c.http, c.BaseURL(n), connect.WithInterceptors(apiclient.Bearer(Token)))
}

// ClusterClient returns a ClusterService client for a node's API.
func (c *Cluster) ClusterClient(n *Node) fakv1connect.ClusterServiceClient {
	return fakv1connect.NewClusterServiceClient(c.http, c.BaseURL(n), connect.WithInterceptors(apiclient.Bearer(Token)))
}

// NodeClient returns a NodeService client for a node's API.
func (c *Cluster) NodeClient(n *Node) fakv1connect.NodeServiceClient {
	return fakv1connect.NewNodeServiceClient(c.http, c.BaseURL(n), connect.WithInterceptors(apiclient.Bearer(Token)))
}

// RunnerClient returns a RunnerService client for a node's API.
func (c *Cluster) RunnerClient(n *Node) fakv1connect.RunnerServiceClient {
	return fakv1connect.NewRunnerServiceClient(c.http, c.BaseURL(n), connect.WithInterceptors(apiclient.Bearer(Token)))
}

// Node returns the fleet member named name (nil if none).
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// HTTPClient is the client the fleet's API clients use: h2c, or HTTP/2
// over TLS with the fleet's client certificate when Options.TLS.
func (c *Cluster) HTTPClient() *http.Client { return c.http }

// Context returns a context cancelled at the end of the test or timeout.
func (c *Cluster) Context(timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	c.t.Cleanup(cancel)
	return ctx
}

// freeAddr is a loopback address whose port is free for TCP and UDP and
// outside the ephemeral range, so a restarted node can bind it again.
func freeAddr(t testing.TB) string {
	t.Helper()
	addrs, err := freeport.Addrs(1)
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	return addrs[0]
}

// testLog sends node logs to the test log until the test ends, then drops
// them: goroutines of a stopped node (memberlist's) may log late, and
// touching a finished test is a race.
type testLog struct {
	t      testing.TB
	mu     sync.RWMutex
	closed bool
}

func (w *testLog) Write(p []byte) (int, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if !w.closed {
		w.t.Log(string(p))
	}
	return len(p), nil
}

func (w *testLog) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}
