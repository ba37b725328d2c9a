package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fak-dev/fak/api"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/runner/echo"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// labelFlag is a repeatable k=v flag.
type labelFlag struct{ m map[string]string }

func (l *labelFlag) String() string {
	var out []string
	for k, v := range l.m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func (l *labelFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	if l.m == nil {
		l.m = map[string]string{}
	}
	l.m[k] = val
	return nil
}

// uint32Value is a uint32 flag.
type uint32Value struct{ p *uint32 }

func (u uint32Value) String() string {
	if u.p == nil {
		return "0"
	}
	return strconv.FormatUint(uint64(*u.p), 10)
}

func (u uint32Value) Set(v string) error {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return fmt.Errorf("want a number of sessions: %w", err)
	}
	*u.p = uint32(n)
	return nil
}

// retentionValue is a duration flag that also takes whole days ("30d"),
// the unit retention is thought of in.
type retentionValue struct{ p *time.Duration }

func (r retentionValue) String() string {
	if r.p == nil || *r.p == 0 {
		return "0"
	}
	if *r.p%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(*r.p/(24*time.Hour)), 10) + "d"
	}
	return r.p.String()
}

func (r retentionValue) Set(v string) error {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseUint(days, 10, 16)
		if err != nil {
			return fmt.Errorf(`want whole days such as "30d", or a duration such as "720h"`)
		}
		*r.p = time.Duration(n) * 24 * time.Hour
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf(`want whole days such as "30d", or a duration such as "720h"`)
	}
	*r.p = d
	return nil
}

func runAgent(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fak agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg              node.Config
		join             stringList
		tokenFile        string
		noAuth           bool
		logLevel         string
		logJSON          bool
		leaveOnTerminate bool
		pprofAddr        string
		labels           labelFlag
		accountRefs      stringList
		providers        stringList
		models           stringList
		gossipKeys       stringList
		memoryTarget     int64 = defaultMemoryTarget
	)
	fs.StringVar(&cfg.Name, "name", "", "node name: its stable identity in Raft and gossip (required)")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "directory for the Raft log, snapshots and state (required)")
	fs.StringVar(&cfg.APIAddr, "api-addr", "127.0.0.1:7401", "address of the Connect API (host:port)")
	fs.StringVar(&cfg.RaftAddr, "raft-addr", "127.0.0.1:7501", "address for Raft traffic (host:port); outgoing cluster traffic leaves from its IP")
	fs.StringVar(&cfg.GossipAddr, "gossip-addr", "127.0.0.1:7601", "address for gossip (host:port, TCP and UDP)")
	fs.StringVar(&cfg.AdvertiseAPI, "advertise-api", "", "API address peers forward to, when not --api-addr (NAT, containers)")
	fs.StringVar(&cfg.AdvertiseRaft, "advertise-raft", "", "Raft address peers dial, when not --raft-addr")
	fs.StringVar(&cfg.AdvertiseGossip, "advertise-gossip", "", "gossip address peers use, when not --gossip-addr")
	fs.IntVar(&cfg.BootstrapExpect, "bootstrap-expect", 0, "form a new cluster once this many servers see each other")
	fs.Var(&join, "join", "gossip address of an existing member (repeatable); retried until one answers")
	fs.BoolVar(&cfg.Voter, "voter", true, "join as a Raft voter; false makes a non-voting replica")
	fs.StringVar(&tokenFile, "token-file", "", "file of accepted API bearer tokens, one per line: \"ROLE TOKEN\" (role operator, agent or read) or a bare operator TOKEN (required unless --no-auth)")
	fs.BoolVar(&noAuth, "no-auth", false, "serve the API without authentication (never in production)")
	fs.IntVar(&cfg.MaxEventBytes, "max-event-bytes", api.DefaultMaxEventBytes, "largest accepted event (text + data) in bytes")
	fs.IntVar(&cfg.MaxCallsPerCaller, "max-calls-per-caller", api.DefaultMaxCallsPerCaller,
		"unary API calls one caller (bearer token, or IP address without one) may have in flight on this node (-1: no limit)")
	fs.DurationVar(&cfg.DeadServerGrace, "dead-server-grace", cluster.DefaultDeadServerGrace, "remove a server from Raft after it has been dead this long")
	fs.Uint64Var(&cfg.SnapshotThreshold, "snapshot-threshold", cluster.DefaultSnapshotThreshold, "Raft log entries between snapshots, at least")
	fs.Float64Var(&cfg.SnapshotLogFraction, "snapshot-log-fraction", cluster.DefaultSnapshotLogFraction,
		"snapshot only once the log since the last is this fraction of the state's size, so snapshots cost in proportion to what is written (0: every --snapshot-threshold entries)")
	cfg.SnapshotRate = cluster.DefaultSnapshotRate
	fs.Var(byteSizeValue{&cfg.SnapshotRate}, "snapshot-rate", "bytes a second a snapshot is copied at while the node serves, so writes are not held up behind it (e.g. 16MiB; 0: as fast as it can; the one before a clean shutdown is never paced)")
	fs.DurationVar(&cfg.EchoTurn, "echo-turn", echo.DefaultTurnDuration, "length of one turn of the built-in echo runtime adapter (negative: no pauses)")
	fs.Var(&labels, "label", "node label k=v for placement constraints (repeatable)")
	fs.Var(uint32Value{&cfg.Capacity}, "capacity", "most sessions placed on this node (0: unlimited)")
	fs.Int64Var(&cfg.MaxWorkspaceBytes, "max-workspace-bytes", node.DefaultMaxWorkspaceBytes, "largest session workspace (file bytes) this node moves, sends or restores; past it a move is refused (0: unlimited)")
	fs.Var(&accountRefs, "account-ref", "account ref this node can resolve, by name (repeatable)")
	fs.Var(&providers, "provider", "provider this node can run (repeatable)")
	fs.Var(&models, "model", "model this node can run (repeatable)")
	fs.DurationVar(&cfg.RecoverAfter, "recover-after", node.DefaultRecoverAfter, "recover a node's sessions on other nodes after it has been dead in gossip this long")
	fs.Var(retentionValue{&cfg.RetainStopped}, "retain-stopped", "purge sessions stopped longer than this, in days (\"30d\") or a duration (\"720h\"); each purge is in the audit log (0: keep them)")
	fs.Var(&gossipKeys, "gossip-key", "base64 gossip encryption key (16/24/32 bytes; `fak keygen`); repeatable: the first encrypts, all decrypt (rotation)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "node certificate (PEM) for mutual TLS on Raft and the API; needs --tls-key and --tls-ca (`fak tls init`)")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "node private key (PEM) for --tls-cert")
	fs.StringVar(&cfg.TLSCA, "tls-ca", "", "CA certificate (PEM) that signs every node and client certificate of the fleet")
	fs.BoolVar(&leaveOnTerminate, "leave-on-terminate", false, "on SIGTERM, leave the cluster gracefully before exiting")
	fs.Var(byteSizeValue{&memoryTarget}, "memory-target", "keep the process's Go memory near this size while its live heap is under two thirds of it, then at 1.5× the live heap (e.g. 56MiB; 0: no limit; GOMEMLIMIT in the environment wins)")
	fs.StringVar(&pprofAddr, "pprof-addr", "", "serve Go's net/http/pprof on this address (e.g. 127.0.0.1:6060); off when empty")
	fs.StringVar(&logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	fs.BoolVar(&logJSON, "log-json", false, "log JSON lines")
	blocks, err := parseAgentConfig(fs, args) // the command line, then --config
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fak agent: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg.Join = join
	cfg.GossipKeys = gossipKeys
	cfg.Labels, cfg.AccountRefs, cfg.Providers, cfg.Models = labels.m, accountRefs, providers, models
	cfg.Runtimes, cfg.Accounts, cfg.Prices, cfg.TokenFile = blocks.Runtimes, blocks.Accounts, blocks.Prices, tokenFile
	logger, err := newLogger("fak", logLevel, logJSON, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "fak agent:", err)
		return 2
	}
	cfg.Logger = logger
	// A full disk ends the process with the one line the cluster logged
	// (what, where, how much room): no stack trace, exit code 2. The
	// fleet serves on, and a restart with room catches up.
	cfg.OnStorageFull = func(*cluster.StorageError) { os.Exit(2) }
	switch {
	case noAuth:
		logger.Warn("API authentication is disabled (--no-auth)")
	case tokenFile == "":
		fmt.Fprintln(stderr, "fak agent: --token-file is required (or --no-auth)")
		return 2
	default:
		if cfg.Tokens, err = api.LoadTokens(tokenFile); err != nil {
			fmt.Fprintln(stderr, "fak agent:", err)
			return 1
		}
	}
	if pprofAddr != "" {
		if err := servePprof(pprofAddr); err != nil {
			fmt.Fprintln(stderr, "fak agent:", err)
			return 1
		}
		logger.Info("pprof listening", "addr", pprofAddr)
	}
	n, err := node.Start(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "fak agent:", err)
		return 1
	}
	memCtx, stopMem := context.WithCancel(context.Background())
	defer stopMem()
	logger.Info("memory target", "target", startMemoryGovernor(memCtx, memoryTarget, logger))
	return waitForSignals([]*node.Node{n}, leaveOnTerminate, stderr)
}

// waitForSignals runs until SIGINT/SIGTERM (or every node stopped by itself),
// then stops the nodes. By default a signal stops a node without leaving —
// like Consul and Nomad servers — so restarting a whole fleet keeps its Raft
// configuration; with leaveOnTerminate, SIGTERM leaves gracefully first. A
// second signal exits at once. SIGHUP reloads each node's tokens file and
// TLS files (node.Reload) and keeps running.
func waitForSignals(nodes []*node.Node, leaveOnTerminate bool, stderr io.Writer) int {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	hups := make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	defer signal.Stop(hups)
	stopReload := make(chan struct{})
	defer close(stopReload)
	go reloadOnHangup(nodes, hups, stopReload, stderr)
	allDone := make(chan struct{})
	go func() {
		for _, n := range nodes {
			<-n.Done()
		}
		close(allDone)
	}()
	var sig os.Signal
	select {
	case sig = <-sigs:
	case <-allDone:
		return 0
	case err := <-nodes[0].ServeErr():
		fmt.Fprintln(stderr, "fak: api server:", err)
		for _, n := range nodes {
			n.Shutdown()
		}
		return 1
	}
	go func() {
		<-sigs
		fmt.Fprintln(stderr, "fak: second signal; exiting now")
		os.Exit(1)
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// All at once: stopping a dev fleet node by node would make the
		// last ones hold elections on the way down.
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Add(1)
			go func(n *node.Node) {
				defer wg.Done()
				if sig == syscall.SIGTERM && leaveOnTerminate {
					n.Leave()
				} else {
					n.Shutdown()
				}
			}(n)
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		fmt.Fprintln(stderr, "fak: shutdown timed out")
		return 1
	}
	return 0
}

// reloadOnHangup reloads every node at each SIGHUP until stop closes; a
// reload that fails leaves that node as it was and says why on stderr.
func reloadOnHangup(nodes []*node.Node, hups <-chan os.Signal, stop <-chan struct{}, stderr io.Writer) {
	for {
		select {
		case <-stop:
			return
		case <-hups:
		}
		for _, n := range nodes {
			if _, err := n.Reload(); err != nil {
				fmt.Fprintf(stderr, "fak: %s: %v\n", n.Name(), err)
			}
		}
	}
}
