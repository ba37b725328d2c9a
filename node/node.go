package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fak-dev/fak/api"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/echo"
	"github.com/fak-dev/fak/node/runner/proc"
	"github.com/fak-dev/fak/node/workspace"
)

const (
	retryJoinInterval = time.Second
	leaveTimeout      = 10 * time.Second
	shutdownTimeout   = 5 * time.Second
)

// Node is one running fak server.
type Node struct {
	cfg     Config
	logger  hclog.Logger
	fsm     *fsm.FSM
	cluster *cluster.Cluster
	api     *api.Server
	apiLn   net.Listener
	runner  *runner.Runner
	// peerTLS is the client TLS configuration for other nodes' APIs.
	peerTLS *tls.Config
	// tls is the node's TLS identity (nil: plaintext); token the token it
	// calls APIs with. A reload replaces both (reload.go).
	tls   *cluster.NodeTLS
	token ownToken
	// copier is the runner once it exists, for the API (workspace copies).
	copier   atomic.Pointer[runner.Runner]
	runnerIO *apiWriter
	metrics  *metrics

	// Background controllers (the reaper, the move controller) run under
	// bgCtx until shutdown; they act only while this node leads.
	bgCancel context.CancelFunc
	bg       sync.WaitGroup

	serveErr     chan error
	done         chan struct{}
	shutdownOnce sync.Once
	shutdownErr  error
}

// Start opens the node's state, starts Raft, gossip and the API server, and
// joins the fleet in the background.
func Start(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	logger := cfg.Logger.With("node", cfg.Name)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	f, err := fsm.Open(cfg.DataDir, logger.Named("fsm"))
	if err != nil {
		return nil, err
	}
	sec, err := cfg.loadSecurity()
	if err != nil {
		f.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("api listen %s: %w", cfg.APIAddr, err)
	}
	apiAddr := ln.Addr().String()
	if cfg.AdvertiseAPI != "" {
		apiAddr = cfg.AdvertiseAPI
	}
	m := newMetrics()
	c, err := cluster.New(cluster.Config{
		Name: cfg.Name, DataDir: cfg.DataDir,
		RaftAddr: cfg.RaftAddr, GossipAddr: cfg.GossipAddr, APIAddr: apiAddr,
		AdvertiseRaft: cfg.AdvertiseRaft, AdvertiseGossip: cfg.AdvertiseGossip,
		BootstrapExpect: cfg.BootstrapExpect, Join: cfg.Join, Voter: cfg.Voter,
		DeadServerGrace:   cfg.DeadServerGrace,
		SnapshotThreshold: cfg.SnapshotThreshold, SnapshotInterval: cfg.SnapshotInterval,
		TrailingLogs: cfg.TrailingLogs, SnapshotLogFraction: cfg.SnapshotLogFraction, SnapshotRate: cfg.SnapshotRate,
		Observer:      m,
		Logger:        logger,
		OnStorageFull: cfg.OnStorageFull, StoreFault: cfg.StoreFault,
		GossipKeys: sec.gossipKeys, TLS: sec.tls,
	}, f)
	if err != nil {
		ln.Close()
		f.Close()
		return nil, err
	}
	// Workspace snapshots (chunks and manifests) live beside the
	// workspaces: what a move carries, what a destination already holds.
	store, err := workspace.OpenStore(filepath.Join(cfg.DataDir, "workspace-store"))
	if err != nil {
		c.Shutdown()
		ln.Close()
		f.Close()
		return nil, err
	}
	// Before any turn starts: a previous run's turns still alive die here.
	if cfg.turnGroups, err = openTurnGroups(cfg.DataDir, logger); err != nil {
		c.Shutdown()
		ln.Close()
		f.Close()
		return nil, err
	}
	cfg.runtimeKey = newRuntimeKey()
	gw, err := cfg.gatewayConfig(cfg.runtimeKey)
	if err != nil {
		cfg.turnGroups.Close()
		c.Shutdown()
		ln.Close()
		f.Close()
		return nil, err
	}
	cfg.gatewayURL = gatewayURL(ln.Addr(), sec.apiServerTLS() != nil)
	adapters, err := cfg.adapters()
	if err != nil {
		cfg.turnGroups.Close()
		c.Shutdown()
		ln.Close()
		f.Close()
		return nil, err
	}
	var adapterNames []string
	for _, a := range adapters {
		adapterNames = append(adapterNames, a.Name())
	}
	if err := c.SetCapabilities(cfg.capabilities(adapterNames)); err != nil {
		cfg.turnGroups.Close()
		c.Shutdown()
		ln.Close()
		f.Close()
		return nil, err
	}
	n := &Node{
		cfg: cfg, logger: logger, fsm: f, cluster: c, apiLn: ln, metrics: m,
		serveErr: make(chan error, 1), done: make(chan struct{}),
	}
	n.peerTLS, n.tls = sec.peerClientTLS(), sec.tls
	n.token.set(cfg.ownToken())
	mv := newMover(n)
	c.SetCompanions(mv.companions)
	n.api = api.New(api.Config{
		NodeName: cfg.Name, APIAddr: apiAddr, Tokens: cfg.Tokens,
		MaxEventBytes: cfg.MaxEventBytes, MaxCallsPerCaller: cfg.MaxCallsPerCaller, Limits: cfg.APILimits, LeaseTTL: cfg.LeaseTTL, AttachmentTTL: cfg.AttachmentTTL,
		Leave: n.leaveAndShutdown, Blocked: mv.blocked, Logger: logger, Metrics: m.reg,
		TLS: sec.apiServerTLS(), PeerTLS: sec.peerClientTLS(), Gateway: gw, Workspaces: store,
		CopyWorkspace: func(ctx context.Context, _, digest, from string) (*fsmpb.WorkspaceTransfer, error) {
			r := n.copier.Load()
			if r == nil {
				return nil, &fsm.Error{Reason: fsm.ReasonNotFound, Message: "node " + cfg.Name + " is starting: no workspace copies yet"}
			}
			return r.HoldCopy(ctx, digest, from)
		},
	}, c, f)
	m.watch(c, f)
	go func() { n.serveErr <- n.api.Serve(ln) }()
	n.runnerIO = newAPIWriter(localAddr(ln.Addr()), n.token.get, sec.peerClientTLS())
	n.runner = runner.New(runner.Config{
		Node: cfg.Name, FSM: f, Writer: n.runnerIO,
		Adapters:      adapters,
		WorkspaceRoot: filepath.Join(cfg.DataDir, "workspaces"),
		Workspaces:    store, MaxWorkspaceBytes: cfg.MaxWorkspaceBytes,
		Sources: newPeerWorkspaces(f, n.token.get, sec.peerClientTLS()).source,
		Addr:    apiAddr,
		Logger:  logger,
	})
	n.copier.Store(n.runner)
	n.runner.Start()
	c.SetRunnerHints(func(h cluster.RunnerHint) {
		if h.View != nil {
			n.runner.HintMoveStep(h.View)
			return
		}
		n.runner.Hint(h.SessionID, h.Epoch, h.InputSeq)
	})
	var bgCtx context.Context
	bgCtx, n.bgCancel = context.WithCancel(context.Background())
	n.bg.Add(1)
	go func() { defer n.bg.Done(); n.reapLoop(bgCtx) }()
	if cfg.RetainStopped > 0 {
		n.bg.Add(1)
		go func() { defer n.bg.Done(); n.retentionLoop(bgCtx) }()
	}
	n.bg.Add(1)
	go func() { defer n.bg.Done(); mv.run(bgCtx) }()
	n.bg.Add(1)
	go func() { defer n.bg.Done(); n.sweepWorkspaceStore(bgCtx, store) }()
	go n.retryJoin()
	logger.Info("node started", "api", apiAddr, "raft", c.RaftAddr(), "gossip", c.GossipAddr())
	return n, nil
}

// retryJoin joins gossip through cfg.Join, retrying until one address
// answers (peers may start in any order), like Consul's retry_join.
func (n *Node) retryJoin() {
	if len(n.cfg.Join) == 0 {
		return
	}
	for {
		joined, err := n.cluster.Join(n.cfg.Join)
		if joined > 0 {
			n.logger.Info("joined gossip", "contacted", joined)
			return
		}
		n.logger.Debug("join failed; retrying", "error", err)
		select {
		case <-n.done:
			return
		case <-time.After(retryJoinInterval):
		}
	}
}

// Name, APIAddr, RaftAddr and GossipAddr describe the running node.
func (n *Node) Name() string       { return n.cfg.Name }
func (n *Node) APIAddr() string    { return n.apiLn.Addr().String() }
func (n *Node) RaftAddr() string   { return n.cluster.RaftAddr() }
func (n *Node) GossipAddr() string { return n.cluster.GossipAddr() }

// Cluster and FSM expose the node's internals to tests.
func (n *Node) Cluster() *cluster.Cluster { return n.cluster }
func (n *Node) FSM() *fsm.FSM             { return n.fsm }

// Done is closed when the node has shut down (e.g. after a Leave RPC).
func (n *Node) Done() <-chan struct{} { return n.done }

// ServeErr reports a fatal API server error.
func (n *Node) ServeErr() <-chan error { return n.serveErr }

// Leave leaves the cluster gracefully, then shuts down.
func (n *Node) Leave() error {
	n.logger.Info("leaving cluster")
	err := n.leave()
	if err != nil {
		n.logger.Warn("graceful leave incomplete", "error", err)
	}
	if serr := n.Shutdown(); err == nil {
		err = serr
	}
	return err
}

// leaveAndShutdown serves the Leave RPC: leave synchronously, then shut down
// after the response has been written.
func (n *Node) leaveAndShutdown() error {
	n.logger.Info("leave requested over the API")
	if err := n.leave(); err != nil {
		return err
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		n.Shutdown()
	}()
	return nil
}

// Shutdown stops the node without leaving: it stays a member of the Raft
// configuration and rejoins with its state when started again.
func (n *Node) Shutdown() error {
	n.shutdownOnce.Do(func() {
		n.logger.Info("shutting down")
		// The runner writes through the API, so it stops first; a turn it
		// cuts short is closed as interrupted by the session's next runner.
		n.cluster.SetRunnerHints(nil)
		n.runner.Stop()
		// Every turn has ended: the reaper finds nothing left to kill.
		n.cfg.turnGroups.Close()
		n.runnerIO.close()
		n.bgCancel()
		n.bg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := n.api.Shutdown(ctx); err != nil {
			n.logger.Warn("api shutdown", "error", err)
		}
		n.shutdownErr = n.cluster.Shutdown()
		if err := n.fsm.Close(); err != nil && n.shutdownErr == nil {
			n.shutdownErr = err
		}
		close(n.done)
	})
	return n.shutdownErr
}

// openTurnGroups opens the records of the node's turn process groups
// (<data-dir>/turns), which kills those a previous run left, and says
// what it killed and whether a reaper kills the groups when the node's
// process dies.
func openTurnGroups(dataDir string, logger hclog.Logger) (*proc.Groups, error) {
	g, err := proc.OpenGroups(filepath.Join(dataDir, "turns"))
	if err != nil {
		return nil, err
	}
	if swept := g.Swept(); len(swept) > 0 {
		logger.Warn("killed turn processes a previous run of this node left running", "process_groups", swept)
	}
	if err := g.ReaperErr(); err != nil {
		logger.Warn("no turn reaper: if this node's process is killed, its turns' processes other than their leaders live until it starts again",
			"error", err)
	}
	return g, nil
}

// echoTurn maps Config.EchoTurn to the echo adapter's turn length.
func echoTurn(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return echo.DefaultTurnDuration
	case d < 0:
		return 0
	}
	return d
}
