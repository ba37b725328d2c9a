package node

import (
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Version is reported by fak_build_info. Set it at build time with
// -ldflags "-X github.com/fak-dev/fak/node.Version=..."; otherwise it is the
// main module's version from the build info, or "dev".
var Version = ""

// Metrics. Every node has its own registry, served by its API on GET
// /metrics: `fak dev` and the tests run several nodes in one process, so
// nothing goes to Prometheus's global registry. What can be read from state
// (Raft status, the FSM census) is collected at scrape time, so nothing
// polls; what happens (applies, snapshots, moves) is observed as it happens.
type metrics struct {
	reg *prometheus.Registry

	applyDuration prometheus.Histogram
	applyFailures prometheus.Counter
	entryCommands prometheus.Histogram
	fsmBatch      prometheus.Histogram
	snapshotTime  prometheus.Histogram
	snapshotSize  prometheus.Gauge
	snapshotBytes prometheus.Counter
	snapshots     *prometheus.CounterVec
	commitNudges  *prometheus.CounterVec
	moves         *prometheus.CounterVec
	movePhase     *prometheus.HistogramVec
	moveWsBytes   *prometheus.CounterVec
	moveDuration  *prometheus.HistogramVec
}

// powersOfTwo: 1, 2, 4, ... up to max, for batch sizes.
func powersOfTwo(max float64) []float64 {
	var b []float64
	for v := 1.0; v <= max; v *= 2 {
		b = append(b, v)
	}
	return b
}

var moveBuckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		applyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fak_raft_apply_duration_seconds",
			Help:    "Time from proposing a command on the leader to its FSM result (commit and apply included), successful proposals.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		applyFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fak_raft_apply_failures_total",
			Help: "Commands proposed on this node that got no FSM result (not leader, leadership lost, shutdown, caller gave up).",
		}),
		entryCommands: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fak_raft_entry_commands",
			Help:    "Commands coalesced into one Raft log entry by the leader.",
			Buckets: powersOfTwo(512),
		}),
		fsmBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fak_fsm_apply_batch_entries",
			Help:    "Raft log entries applied by the FSM in one batch (one database transaction).",
			Buckets: powersOfTwo(float64(cluster.MaxAppendEntries)),
		}),
		snapshotTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fak_fsm_snapshot_persist_duration_seconds",
			Help:    "Time to write an FSM snapshot to Raft's snapshot store.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		snapshotSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fak_fsm_snapshot_size_bytes",
			Help: "Size of the last FSM snapshot written.",
		}),
		snapshotBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fak_fsm_snapshot_written_bytes_total",
			Help: "Bytes of every FSM snapshot this node wrote since it started (what amortised snapshots bound).",
		}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fak_fsm_snapshots_total",
			Help: "FSM snapshots written, by outcome (ok, error).",
		}, []string{"outcome"}),
		commitNudges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fak_raft_commit_nudges_total",
			Help: "Empty entries the leader appended so that followers learn at once of a commit their runner waits for (an input, an interrupt, a move step), by outcome (ok, error).",
		}, []string{"outcome"}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fak_moves_total",
			Help: "Moves ended by this node's move controller (while it led), by cause and outcome (committed, failed, unsafe).",
		}, []string{"cause", "outcome"}),
		movePhase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fak_move_phase_duration_seconds",
			Help:    "Time a successful move spent in a phase (safe_point_requested, checkpointed, restored), from the leader-stamped transition times.",
			Buckets: moveBuckets,
		}, []string{"phase"}),
		moveWsBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fak_move_workspace_bytes_total",
			Help: "Workspace bytes of the moves this node's controller committed (while it led): sent from the source, or already present on the destination.",
		}, []string{"kind"}),
		moveDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fak_move_duration_seconds",
			Help:    "Time from a move's request to its end, by outcome (committed, failed, unsafe).",
			Buckets: moveBuckets,
		}, []string{"outcome"}),
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(),
		m.applyDuration, m.applyFailures, m.entryCommands, m.fsmBatch,
		m.snapshotTime, m.snapshotSize, m.snapshotBytes, m.snapshots, m.commitNudges,
		m.moves, m.movePhase, m.moveDuration, m.moveWsBytes,
	)
	return m
}

// buildInfo is the constant fak_build_info{version,revision,go_version} 1.
func buildInfo() prometheus.Collector {
	version, revision := Version, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	if version == "" {
		version = "dev"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "fak_build_info",
		Help:        "The fak build this node runs (always 1).",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "go_version": runtime.Version()},
	})
	g.Set(1)
	return g
}

// watch registers the scrape-time collectors over a started node's Raft
// status and FSM replica.
func (m *metrics) watch(c *cluster.Cluster, f *fsm.FSM) {
	m.reg.MustRegister(raftCollector{c}, fsmCollector{f})
}

// The cluster.Observer side.

func (m *metrics) ObserveApply(d time.Duration, err error) {
	if err != nil {
		m.applyFailures.Inc()
		return
	}
	m.applyDuration.Observe(d.Seconds())
}

func (m *metrics) ObserveEntry(commands int)   { m.entryCommands.Observe(float64(commands)) }
func (m *metrics) ObserveFSMBatch(entries int) { m.fsmBatch.Observe(float64(entries)) }

func (m *metrics) ObserveSnapshot(d time.Duration, size int64, err error) {
	if err != nil {
		m.snapshots.WithLabelValues("error").Inc()
		return
	}
	m.snapshots.WithLabelValues("ok").Inc()
	m.snapshotTime.Observe(d.Seconds())
	m.snapshotSize.Set(float64(size))
	m.snapshotBytes.Add(float64(size))
}

func (m *metrics) ObserveCommitNudge(err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.commitNudges.WithLabelValues(outcome).Inc()
}

var _ cluster.Observer = (*metrics)(nil)

// The move controller's side. Durations come from leader-stamped times
// (possibly another leader's clock), so a negative one counts as zero.

func sinceNanos(from, to int64) float64 {
	return max(0, time.Duration(to-from).Seconds())
}

func phaseLabel(state string) string { return strings.ToLower(state) }

// moveAdmitted: the controller admitted a destination at now, ending the
// checkpointed phase; the safe-point phase ended at the checkpoint.
func (m *metrics) moveAdmitted(mv *fsmpb.Move, now int64) {
	m.movePhase.WithLabelValues(phaseLabel(fsm.MoveSafePointRequested)).Observe(sinceNanos(mv.RequestedUnixNano, mv.StateUnixNano))
	m.movePhase.WithLabelValues(phaseLabel(fsm.MoveCheckpointed)).Observe(sinceNanos(mv.StateUnixNano, now))
}

// moveEnded: the controller committed the move's cutover (outcome
// committed, ending the restored phase) or its failure (failed, unsafe).
func (m *metrics) moveEnded(mv *fsmpb.Move, outcome string, now int64) {
	if outcome == "committed" {
		m.movePhase.WithLabelValues(phaseLabel(fsm.MoveRestored)).Observe(sinceNanos(mv.StateUnixNano, now))
		if t := mv.Transfer; t != nil {
			m.moveWsBytes.WithLabelValues("sent").Add(float64(t.BytesSent))
			m.moveWsBytes.WithLabelValues("present").Add(float64(t.BytesPresent))
		}
	}
	m.moves.WithLabelValues(mv.Cause, outcome).Inc()
	m.moveDuration.WithLabelValues(outcome).Observe(sinceNanos(mv.RequestedUnixNano, now))
}

// raftCollector reads cluster.Status() at scrape time.
type raftCollector struct{ c *cluster.Cluster }

var (
	descRaftState       = prometheus.NewDesc("fak_raft_state", "1 for this node's current Raft state, 0 for the others.", []string{"state"}, nil)
	descRaftTerm        = prometheus.NewDesc("fak_raft_term", "Current Raft term.", nil, nil)
	descRaftLastIndex   = prometheus.NewDesc("fak_raft_last_log_index", "Index of the last entry in this node's Raft log.", nil, nil)
	descRaftCommitIndex = prometheus.NewDesc("fak_raft_commit_index", "Highest Raft index this node knows committed.", nil, nil)
	descRaftApplied     = prometheus.NewDesc("fak_raft_applied_index", "Highest Raft index applied to this node's FSM.", nil, nil)
	descRaftLeaderKnown = prometheus.NewDesc("fak_raft_leader_known", "1 while this node knows a leader.", nil, nil)
	raftStates          = []string{"follower", "candidate", "leader", "shutdown"}
)

func (r raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRaftState, descRaftTerm, descRaftLastIndex, descRaftCommitIndex, descRaftApplied, descRaftLeaderKnown} {
		ch <- d
	}
}

func (r raftCollector) Collect(ch chan<- prometheus.Metric) {
	st := r.c.Status()
	state := strings.ToLower(st.State)
	for _, s := range raftStates {
		ch <- prometheus.MustNewConstMetric(descRaftState, prometheus.GaugeValue, boolFloat(s == state), s)
	}
	ch <- prometheus.MustNewConstMetric(descRaftTerm, prometheus.GaugeValue, float64(st.Term))
	ch <- prometheus.MustNewConstMetric(descRaftLastIndex, prometheus.GaugeValue, float64(st.LastLogIndex))
	ch <- prometheus.MustNewConstMetric(descRaftCommitIndex, prometheus.GaugeValue, float64(st.CommitIndex))
	ch <- prometheus.MustNewConstMetric(descRaftApplied, prometheus.GaugeValue, float64(st.AppliedIndex))
	ch <- prometheus.MustNewConstMetric(descRaftLeaderKnown, prometheus.GaugeValue, boolFloat(st.LeaderID != ""))
}

// fsmCollector takes the FSM census of the local replica at scrape time.
type fsmCollector struct{ f *fsm.FSM }

var (
	descSessions    = prometheus.NewDesc("fak_sessions", "Sessions in this node's replica, by state.", []string{"state"}, nil)
	descLeases      = prometheus.NewDesc("fak_leases_held", "Sessions whose input lease is held.", nil, nil)
	descAttachments = prometheus.NewDesc("fak_attachments", "Client attachments registered on sessions.", nil, nil)
	descMovesOpen   = prometheus.NewDesc("fak_moves_open", "Sessions with a move in progress.", nil, nil)
	descStranded    = prometheus.NewDesc("fak_sessions_stranded", "Sessions stranded on a dead node (recover=manual), waiting for an operator.", nil, nil)
	descPurged      = prometheus.NewDesc("fak_sessions_purged_total", "Sessions purged from the fleet's state since it began, by cause (operator, retention); each is in the audit log.", []string{"cause"}, nil)
	descPurgedBytes = prometheus.NewDesc("fak_sessions_purged_journal_bytes_total", "Journal bytes the purged sessions held.", nil, nil)
	descStateBytes  = prometheus.NewDesc("fak_fsm_state_bytes", "Size of this node's replica of the fleet's state (the FSM database).", nil, nil)
	descWarmup      = prometheus.NewDesc("fak_move_warmup_seconds",
		"The warm-up of each session's last move: its first turn after cutover, turn.started to turn.completed (leader-stamped), by what the move kept of the provider cache (warm, cold, none).", []string{"cache"}, nil)
	descCopyTime = prometheus.NewDesc("fak_workspace_copy_seconds",
		"Each session's newest workspace copy on another node: from the end of its turn to the copy held (snapshot and transfer).", nil, nil)
	descCopyBytes = prometheus.NewDesc("fak_workspace_copy_bytes",
		"What each session's newest workspace copy cost, summed over sessions: bytes the copy node fetched (sent) and already held (present).", []string{"kind"}, nil)
)

// constHistogram buckets durations for a census: each session counts once.
func constHistogram(desc *prometheus.Desc, ds []time.Duration, labels ...string) prometheus.Metric {
	counts := make(map[float64]uint64, len(moveBuckets))
	var sum float64
	for _, d := range ds {
		s := d.Seconds()
		sum += s
		for _, b := range moveBuckets {
			if s <= b {
				counts[b]++
			}
		}
	}
	return prometheus.MustNewConstHistogram(desc, uint64(len(ds)), sum, counts, labels...)
}

func (c fsmCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSessions, descLeases, descAttachments, descMovesOpen, descStranded, descWarmup, descCopyTime, descCopyBytes, descPurged, descPurgedBytes, descStateBytes} {
		ch <- d
	}
}

func (c fsmCollector) Collect(ch chan<- prometheus.Metric) {
	counts, err := c.f.Counts()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descSessions, err)
		return
	}
	for _, st := range []fsmpb.SessionState{fsmpb.SessionState_SESSION_STATE_ACTIVE, fsmpb.SessionState_SESSION_STATE_STOPPED} {
		ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(counts.Sessions[st]), sessionStateLabel(st))
	}
	ch <- prometheus.MustNewConstMetric(descLeases, prometheus.GaugeValue, float64(counts.LeasesHeld))
	ch <- prometheus.MustNewConstMetric(descAttachments, prometheus.GaugeValue, float64(counts.Attachments))
	ch <- prometheus.MustNewConstMetric(descMovesOpen, prometheus.GaugeValue, float64(counts.OpenMoves))
	ch <- prometheus.MustNewConstMetric(descStranded, prometheus.GaugeValue, float64(counts.Stranded))
	for _, cache := range []string{fsm.CacheWarm, fsm.CacheCold, fsm.CacheNone} {
		ch <- constHistogram(descWarmup, counts.Warmups[cache], cache)
	}
	ch <- constHistogram(descCopyTime, counts.CopyTimes)
	ch <- prometheus.MustNewConstMetric(descCopyBytes, prometheus.GaugeValue, float64(counts.CopyBytesSent), "sent")
	ch <- prometheus.MustNewConstMetric(descCopyBytes, prometheus.GaugeValue, float64(counts.CopyBytesPresent), "present")
	for _, cause := range []string{fsm.PurgeCauseOperator, fsm.PurgeCauseRetention} {
		ch <- prometheus.MustNewConstMetric(descPurged, prometheus.CounterValue, float64(counts.Purged[cause]), cause)
	}
	ch <- prometheus.MustNewConstMetric(descPurgedBytes, prometheus.CounterValue, float64(counts.PurgedBytes))
	ch <- prometheus.MustNewConstMetric(descStateBytes, prometheus.GaugeValue, float64(counts.StateBytes))
}

// sessionStateLabel: SESSION_STATE_ACTIVE → active.
func sessionStateLabel(s fsmpb.SessionState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "SESSION_STATE_"))
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
