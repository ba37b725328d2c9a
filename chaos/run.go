package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/chaos/checker"
	"github.com/fak-dev/fak/chaos/history"
)

// Config is one chaos run.
type Config struct {
	Seed     int64
	Duration time.Duration // how long faults are injected
	// Mode is "process" (default) or "docker".
	Mode    string
	Nemeses []NemesisKind // default: all
	// OutDir receives the history, the report, node logs and, on a
	// linearizability failure, porcupine's visualization.
	OutDir   string
	Workload WorkloadConfig
	// FakBin is a prebuilt fak binary; empty builds one with BuildTags.
	FakBin    string
	BuildTags string
	// Progress receives a line per phase and per fault (nil: discard).
	Progress io.Writer
	// CheckTimeout bounds the linearizability check (default 2m).
	CheckTimeout time.Duration
	// RecoverAfter is the nodes' --recover-after (default 3s).
	RecoverAfter time.Duration
	// UpgradeTo, when set, is a fak binary the fleet (started on FakBin)
	// is upgraded to one node at a time under the load, in place of the
	// fault phase (process mode; upgrade.go).
	UpgradeTo string
	Logger    hclog.Logger
}

const chaosToken = "chaos-token"

// Run starts a fleet, loads it under the seeded fault plan, heals and
// restarts it, and checks the history. The error is for a run that could
// not be carried out; a run that found a bug returns a Report whose Ok is
// false.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Mode == "" {
		cfg.Mode = "process"
	}
	if cfg.Nemeses == nil {
		cfg.Nemeses = AllNemeses
	}
	if cfg.CheckTimeout == 0 {
		cfg.CheckTimeout = 2 * time.Minute
	}
	if cfg.RecoverAfter == 0 {
		cfg.RecoverAfter = 3 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.OutDir == "" {
		return nil, errors.New("chaos: OutDir is required")
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, err
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	var plock sync.Mutex
	rec := history.NewRecorder()
	since := func() time.Duration { return time.Duration(rec.Now()) }
	logf := func(format string, args ...any) {
		plock.Lock()
		defer plock.Unlock()
		fmt.Fprintf(progress, "[%7.1fs] %s\n", since().Seconds(), fmt.Sprintf(format, args...))
	}

	plan := NewPlan(cfg.Seed, cfg.Duration, cfg.Nemeses)
	rep := &Report{Seed: cfg.Seed, Mode: cfg.Mode, Duration: cfg.Duration, Nemeses: cfg.Nemeses, OutDir: cfg.OutDir, BuildTags: cfg.BuildTags}
	logf("seed %d, %s of faults from %s (%d planned steps)", cfg.Seed, cfg.Duration, joinKinds(cfg.Nemeses), len(plan.Steps))

	model := newModelEndpoint()
	defer model.Close() // after the fleet's Close (defers run last first)
	fleet, err := startFleet(cfg, model)
	if err != nil {
		return nil, err
	}
	defer fleet.Close()
	rep.Fleet = fleet.Describe()
	logf("fleet: %s", rep.Fleet)
	if df, ok := fleet.(*dockerFleet); ok {
		model.probeDocker(df)
	}
	if model.off != "" {
		logf("no model sessions in this run: %s", model.off)
	} else {
		logf("model sessions: runtime %q against a fake OpenAI-compatible server in the harness, at %s", modelRuntime, model.url)
	}
	clients := newNodeClients(fleet, chaosToken)
	if _, err := waitLeader(ctx, clients, 90*time.Second); err != nil {
		return nil, fmt.Errorf("fleet never elected a leader: %w (logs in %s)", err, cfg.OutDir)
	}

	// Load, with a short calm lead-in and tail around the fault phase.
	loadCtx, stopLoad := context.WithCancel(ctx)
	wl := newWorkload(cfg.Workload, rec, clients, fleet.Nodes(), cfg.Seed, logf)
	loadDone := make(chan struct{})
	loadStart := since()
	lw := newLeaseWorkload(clients, fleet.Nodes(), cfg.Seed, logf)
	bw := newBoundaryWorkload(clients, fleet.Nodes(), cfg.Seed)
	ml := newModelWorkload(clients, fleet.Nodes(), cfg.Seed, logf)
	if model.off != "" {
		ml.slots = 0
	}
	mw := newMoveWorkload(clients, fleet.Nodes(), cfg.Seed, func() []string { return append(lw.Sessions(), ml.Active()...) })
	ww := &watchWorkload{w: wl, rec: rec, clients: clients, nodes: fleet.Nodes(), seed: cfg.Seed}
	go func() {
		var wg sync.WaitGroup
		wg.Add(6)
		go func() { defer wg.Done(); ml.run(loadCtx) }()
		go func() { defer wg.Done(); ww.run(loadCtx) }()
		go func() { defer wg.Done(); mw.run(loadCtx) }()
		go func() { defer wg.Done(); wl.run(loadCtx) }()
		go func() { defer wg.Done(); lw.run(loadCtx) }()
		go func() { defer wg.Done(); bw.run(loadCtx) }()
		wg.Wait()
		close(loadDone)
	}()
	nem := newNemesis(fleet, func(c context.Context) string { return findLeader(c, clients) }, since, logf)
	sleepCtx(ctx, 2*time.Second)
	if cfg.UpgradeTo != "" {
		logf("load running; upgrading the fleet one node at a time")
		up, events, err := upgradeFleet(ctx, fleet, clients, cfg.UpgradeTo, since, logf)
		if err != nil {
			stopLoad()
			<-loadDone
			return nil, err
		}
		rep.Upgrade, rep.Faults = up, events
		logf("upgrade over; load continues for 5s")
	} else {
		logf("load running; injecting faults")
		faultCtx, stopFaults := context.WithTimeout(ctx, cfg.Duration)
		nem.run(faultCtx, plan)
		stopFaults()
		rep.Faults = nem.Events()
		logf("faults over, everything healed; load continues for 5s")
	}
	sleepCtx(ctx, 5*time.Second)
	stopLoad()
	<-loadDone
	loadEnd := since()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	// Every replica, applied live through all the faults, must equal its
	// rebuild from snapshot + log (and from the log alone, where it starts
	// at 1) — checked before the final crash, and again after it.
	lines, problems := replayChecks(ctx, clients, fleet.Nodes(), "before the final restart:")
	rep.ReplayChecks, rep.ReplayProblems = append(rep.ReplayChecks, lines...), append(rep.ReplayProblems, problems...)

	// Final state: crash every node at once, restart, read every journal.
	logf("restarting the whole fleet (SIGKILL all, start all)")
	for _, n := range fleet.Nodes() {
		if err := fleet.Kill(n); err != nil {
			logf("kill %s: %v", n, err)
		}
	}
	for _, n := range fleet.Nodes() {
		if err := fleet.Start(n); err != nil {
			return nil, fmt.Errorf("restart %s: %w", n, err)
		}
	}
	if _, err := waitLeader(ctx, clients, 90*time.Second); err != nil {
		return nil, fmt.Errorf("no leader after the final restart: %w", err)
	}
	sessions := wl.Sessions()
	final, err := finalJournals(ctx, clients, fleet.Nodes(), sessions)
	if err != nil {
		return nil, err
	}
	rep.ReplicaProblems = replicasAgree(ctx, clients, fleet.Nodes(), sessions, final, 60*time.Second)
	lines, problems = replayChecks(ctx, clients, fleet.Nodes(), "after it:")
	rep.ReplayChecks, rep.ReplayProblems = append(rep.ReplayChecks, lines...), append(rep.ReplayProblems, problems...)
	// Every input of the model and lease sessions must be answered once
	// the restarted fleet has caught up: wait until none has a queued
	// input or a running turn, then read them for checker.Turns.
	turnIDs := append(ml.Sessions(), lw.Sessions()...)
	settleStart := time.Now()
	rep.Model.Unsettled = settle(ctx, clients, fleet.Nodes(), turnIDs, 60*time.Second)
	rep.Model.Settle = time.Since(settleStart)
	logf("%d model and lease sessions settled in %s (%d not)", len(turnIDs)-len(rep.Model.Unsettled), rep.Model.Settle.Round(time.Millisecond), len(rep.Model.Unsettled))
	turnJ, err := turnJournals(ctx, clients, fleet.Nodes(), turnIDs)
	if err != nil {
		return nil, err
	}
	leaseJournals, err := lw.journals(ctx)
	if err != nil {
		return nil, err
	}
	lineages, err := bw.lineages(ctx)
	if err != nil {
		return nil, err
	}
	moved, err := mw.journals(ctx)
	if err != nil {
		return nil, err
	}
	logf("read %d journals after the restart", len(final))

	ops := rec.Ops()
	if err := history.WriteFile(filepath.Join(cfg.OutDir, "history.jsonl"), ops); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(cfg.OutDir, "final-journals.json"), final); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(cfg.OutDir, "turn-journals.json"), turnJ); err != nil {
		return nil, err
	}
	logf("checking %d operations", len(ops))
	others := map[string][]uint64{}
	for id, j := range final {
		if o := j.Others(); len(o) > 0 {
			others[id] = o
			rep.FleetEvents += len(o)
		}
	}
	rep.FleetEventSessions = len(others)
	rep.Linearizability = checker.Linearizable(ops, checker.Options{
		Timeout: cfg.CheckTimeout, VisualizePath: filepath.Join(cfg.OutDir, "linearizability.html"), Others: others,
	})
	rep.Durability = checker.Durable(ops, final)
	rep.Addresses = checker.Addresses(ops, final)
	rep.Leases = checker.Leases(leaseJournals, lw.Acts())
	rep.Boundaries = checker.Boundaries(lineages)
	rep.Epochs = checker.Epochs(moved)
	rep.Turns = checker.Turns(turnJ)
	rep.Model.Off, rep.Model.Sessions, rep.Model.LeaseSessions = model.off, len(ml.Sessions()), len(lw.Sessions())
	rep.Model.Sent, rep.Model.Acked, rep.Model.Refused, rep.Model.Unknown = ml.sent.Load(), ml.acked.Load(), ml.refused.Load(), ml.unknown.Load()
	rep.Model.Requests = model.Requests()
	rep.Model.Answers, rep.Model.AnswerViolations = modelAnswers(turnJ, ml.Sessions())
	rep.Model.Moves, rep.Model.Recoveries = modelMoves(turnJ, ml.Sessions())
	rep.Model.Workspaces = workspaceWitness(turnJ, ml.Sessions())
	rep.MovesRequested, rep.MovesRefused = mw.requested.Load(), mw.refused.Load()
	rep.stats(ops, rep.Faults, loadStart, loadEnd)
	rep.Logs = fleet.Logs()
	if err := rep.write(cfg.OutDir); err != nil {
		return nil, err
	}
	return rep, nil
}

func startFleet(cfg Config, model *modelEndpoint) (Fleet, error) {
	bin := cfg.FakBin
	if bin == "" {
		var err error
		if bin, err = BuildFak(cfg.OutDir, cfg.BuildTags); err != nil {
			return nil, err
		}
	}
	switch cfg.Mode {
	case "process":
		dir := filepath.Join(cfg.OutDir, "fleet")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		// The nodes reach the fake model server on loopback.
		config := filepath.Join(dir, "agent.hcl")
		if err := model.writeConfig(config); err != nil {
			return nil, err
		}
		return StartProcessFleet(ProcessFleetConfig{
			FakBin: bin, Dir: dir, Token: chaosToken, Logger: cfg.Logger, ExtraArgs: append(nodeArgs(cfg), "--config", config),
		})
	case "docker":
		return StartDockerFleet(DockerFleetConfig{FakBin: bin, Dir: cfg.OutDir, Token: chaosToken, Seed: cfg.Seed, Logger: cfg.Logger,
			ExtraArgs: nodeArgs(cfg), AgentConfig: model.dockerConfig})
	}
	return nil, fmt.Errorf("unknown mode %q (process or docker)", cfg.Mode)
}

// nodeArgs are the agent flags of every chaos fleet: small snapshots, so
// restarts and lagging nodes go through snapshot install, not just log
// replay; and a short recover-after, so a node killed or cut off for a few
// seconds has its sessions recovered elsewhere — recovery moves then write
// their events into workload sessions in the middle of the load.
func nodeArgs(cfg Config) []string {
	return []string{"--snapshot-threshold", "1024", "--echo-turn", "50ms", "--recover-after", cfg.RecoverAfter.String()}
}

// waitLeader waits until some node reports itself leader and a linearizable
// read (ReadIndex) succeeds through it.
func waitLeader(ctx context.Context, clients map[string]*nodeClient, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if l := findLeader(ctx, clients); l != "" {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := clients[l].cluster.ReadIndex(cctx, connect.NewRequest(&fakv1.ReadIndexRequest{}))
			cancel()
			if err == nil {
				return l, nil
			}
			last = err
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return "", ctx.Err()
		}
	}
	if last == nil {
		last = errors.New("no node reports itself leader")
	}
	return "", last
}

// finalJournals reads every session linearizably, retrying through any node.
func finalJournals(ctx context.Context, clients map[string]*nodeClient, nodes []string, sessions map[string]uint64) (map[string]checker.Journal, error) {
	ids := make([]string, 0, len(sessions))
	for id := range sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	final := make(map[string]checker.Journal, len(ids))
	for _, id := range ids {
		deadline := time.Now().Add(60 * time.Second)
		for i := 0; ; i++ {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			evs, err := readEvents(cctx, clients[nodes[i%len(nodes)]], id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)
			cancel()
			if err == nil {
				final[id] = journalOf(evs, sessions[id])
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return nil, fmt.Errorf("final read of %s: %w", id, err)
			}
			sleepCtx(ctx, 200*time.Millisecond)
		}
	}
	return final, nil
}

// replicasAgree waits until every node's local replica (stale read) holds
// exactly the final journals — every event at its address, the fleet's own
// included; it returns what still differs at the deadline.
func replicasAgree(ctx context.Context, clients map[string]*nodeClient, nodes []string, sessions map[string]uint64, final map[string]checker.Journal, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		var problems []string
		for _, n := range nodes {
			for id, want := range final {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				evs, err := readEvents(cctx, clients[n], id, fakv1.ReadConsistency_READ_CONSISTENCY_STALE)
				cancel()
				got := journalOf(evs, sessions[id])
				switch {
				case err != nil:
					problems = append(problems, fmt.Sprintf("%s: read %s: %v", n, id, err))
				case !slices.Equal(got.Events, want.Events):
					problems = append(problems, fmt.Sprintf("%s: replica of %s differs (%d events, linearizable read %d)", n, id, got.Len(), want.Len()))
				}
			}
		}
		if len(problems) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			slices.Sort(problems)
			return problems
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
}
