package runner

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// DefaultScanInterval is the least time between two scans of the replica:
// a burst of applied entries costs one scan, not one per entry. On top of
// it, the pause after a scan is at least scanCostFactor times the scan's
// duration, so scanning a large fleet under load takes a bounded share of
// a core (about 1/scanCostFactor) while a small one reacts within
// milliseconds.
const DefaultScanInterval = 5 * time.Millisecond

// scanCostFactor: see DefaultScanInterval.
const scanCostFactor = 20

// failurePause is how long a session waits after its worker failed (no
// leader for the whole retry budget, an adapter that cannot start) before
// the runner tries it again.
const failurePause = time.Second

// Config configures the runner of one node.
type Config struct {
	// Node is this node's name: the runner hosts the epochs whose
	// placement names it.
	Node string
	// FSM is the node's local replica, watched and read.
	FSM    *fsm.FSM
	Writer Writer
	// Adapters available on this node, by Name (the runtime's name in a
	// placement).
	Adapters []Adapter
	// WorkspaceRoot holds one working directory per session hosted here
	// (<data-dir>/workspaces); empty: none (adapters that need no
	// workspace only).
	WorkspaceRoot string
	// Addr is this node's API address, handed to runtimes.
	Addr         string
	ScanInterval time.Duration
	Logger       hclog.Logger
}

// Runner hosts the execution epochs placed on one node. Each session runs
// at most one turn at a time (one worker goroutine per busy session);
// different sessions run concurrently.
type Runner struct {
	cfg      Config
	adapters map[string]Adapter
	logger   hclog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}
	// swept is the FSM restore count the last sweep of vanished sessions
	// ran at (scan goroutine only).
	swept uint64

	mu     sync.Mutex
	hosts  map[string]*host
	warned map[string]string // session → adapter name already warned about
}

// host is the runner's record of one session it serves.
type host struct {
	busy     bool      // a worker owns the session (and its runtime)
	retryAt  time.Time // after a failed worker, not before this
	epoch    uint64    // epoch of runtime
	resetSeq uint64    // the reset boundary runtime's context starts after
	restores uint64    // the FSM's restore count when runtime started
	runtime  Runtime   // nil until the first turn of the epoch (or of the context after a reset)
}

// stale reports whether h's runtime no longer serves s's current context:
// the session left this node, its epoch changed, a reset cut its context,
// or a snapshot was restored since it started (restores is the FSM's
// count), which may have rewound the journal it read.
func (h *host) stale(s *fsmpb.Session, ours bool, restores uint64) bool {
	return h.runtime != nil && (!ours || h.epoch != s.Epoch || h.resetSeq != s.ResetSeq || h.restores != restores)
}

// New builds a runner; Start runs it.
func New(cfg Config) *Runner {
	if cfg.ScanInterval <= 0 {
		cfg.ScanInterval = DefaultScanInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	r := &Runner{
		cfg: cfg, adapters: make(map[string]Adapter), logger: cfg.Logger.Named("runner"),
		kick: make(chan struct{}, 1), hosts: make(map[string]*host), warned: make(map[string]string),
	}
	for _, a := range cfg.Adapters {
		r.adapters[a.Name()] = a
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// Start runs the scan loop in the background until Stop.
func (r *Runner) Start() {
	r.wg.Add(1)
	go r.loop()
}

// Stop cancels every turn in flight, waits for the workers to return and
// stops the runtimes. A turn cut short stays open in the journal; the
// session's next runner closes it as interrupted.
func (r *Runner) Stop() {
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, h := range r.hosts {
		if h.runtime != nil {
			if err := h.runtime.Stop(); err != nil {
				r.logger.Warn("stopping runtime", "session", id, "error", err)
			}
			h.runtime = nil
		}
	}
}

// loop scans after every change of the replica, at most once per
// ScanInterval (longer for a slow scan), and whenever a worker ends (it may
// have left work behind).
// Between two scans a change re-reads only the sessions the last scan saw
// moving (point reads): a move's steps follow each other within
// milliseconds, each waiting for a runner, and must not wait for the next
// scan.
func (r *Runner) loop() {
	defer r.wg.Done()
	throttle := time.NewTimer(0)
	defer throttle.Stop()
	for {
		changed := r.cfg.FSM.Changed()
		started := time.Now()
		wake, moving := r.scan()
		throttle.Reset(max(r.cfg.ScanInterval, scanCostFactor*time.Since(started)) - time.Since(started))
		var retry <-chan time.Time
		var timer *time.Timer
		if !wake.IsZero() {
			timer = time.NewTimer(time.Until(wake))
			retry = timer.C
		}
		throttled, due := true, false
		for throttled || !due {
			select {
			case <-r.ctx.Done():
				if timer != nil {
					timer.Stop()
				}
				return
			case <-throttle.C:
				throttled = false
			case <-r.kick:
				due = true
			case <-retry:
				due, retry = true, nil
			case <-changed:
				due, changed = true, nil
				if throttled && len(moving) > 0 {
					changed = r.cfg.FSM.Changed()
					r.reconsider(moving)
				}
			}
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// reconsider re-reads the given sessions and starts the workers they need.
func (r *Runner) reconsider(ids []string) {
	for _, id := range ids {
		if s, err := r.cfg.FSM.Session(id); err == nil {
			r.consider(s)
		}
	}
}

func (r *Runner) kickScan() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// scan starts a worker for every session of this node with work and none
// running. It reads only session records, never journals: an idle session
// costs one decode. It returns the earliest time a paused session may be
// retried (zero: none) and the sessions with an open move.
func (r *Runner) scan() (wake time.Time, moving []string) {
	// After a restore, sessions created since the snapshot are gone: this
	// scan notes the sessions that exist and then forgets the others.
	var seen map[string]bool
	restores := r.cfg.FSM.Restores()
	if restores != r.swept {
		seen = make(map[string]bool)
	}
	after := ""
	for {
		page, more, err := r.cfg.FSM.Sessions(after, 512)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				r.logger.Warn("scanning sessions", "error", err)
			}
			return time.Now().Add(failurePause), moving
		}
		for _, s := range page {
			if seen != nil {
				seen[s.SessionId] = true
			}
			if fsm.MoveOpen(s.Move) {
				moving = append(moving, s.SessionId)
			}
			if w := r.consider(s); !w.IsZero() && (wake.IsZero() || w.Before(wake)) {
				wake = w
			}
		}
		if !more || len(page) == 0 {
			if seen != nil {
				r.forgetVanished(seen)
				r.swept = restores
			}
			return wake, moving
		}
		after = page[len(page)-1].SessionId
	}
}

// forgetVanished stops the runtimes of sessions that no longer exist and
// forgets them. A busy worker's next read finds its session gone and ends;
// a later sweep forgets it.
func (r *Runner) forgetVanished(seen map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, h := range r.hosts {
		if seen[id] || h.busy {
			continue
		}
		if h.runtime != nil {
			if err := h.runtime.Stop(); err != nil {
				r.logger.Warn("stopping runtime", "session", id, "error", err)
			}
		}
		delete(r.hosts, id)
		delete(r.warned, id)
		r.logger.Debug("forgot a session that no longer exists", "session", id)
	}
}

// ours reports whether this node runs s's current epoch.
func (r *Runner) ours(s *fsmpb.Session) bool {
	return s.State == fsmpb.SessionState_SESSION_STATE_ACTIVE && s.GetPlacement().GetNode() == r.cfg.Node
}

func (r *Runner) consider(s *fsmpb.Session) (wake time.Time) {
	ours := r.ours(s)
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.hosts[s.SessionId]
	if h != nil && h.busy {
		return time.Time{}
	}
	if !ours {
		// Forget sessions that left this node once their runtime is gone.
		delete(r.warned, s.SessionId)
		if h != nil && h.runtime == nil {
			delete(r.hosts, s.SessionId)
			h = nil
		}
	}
	// Turns: an orphaned turn to close, or queued inputs to run unless a
	// move is open (the source starts no turn until it ends). Moves: the
	// source's checkpoint, the destination's restore.
	work := ours && (s.TurnInputSeq != 0 || len(s.QueuedInputs) > 0 && !fsm.MoveOpen(s.Move))
	retire := h != nil && h.stale(s, ours, r.cfg.FSM.Restores())
	if work && r.adapterLocked(s) == nil {
		work = false
	}
	work = work || r.checkpointDue(s) || r.restoreDue(s)
	if !work && !retire {
		return time.Time{}
	}
	if h == nil {
		h = &host{}
		r.hosts[s.SessionId] = h
	}
	if time.Now().Before(h.retryAt) {
		return h.retryAt
	}
	h.busy = true
	r.wg.Add(1)
	go r.work(s.SessionId, h)
	return time.Time{}
}

// adapterLocked returns s's runtime adapter, or nil after warning (once
// per session and adapter name) that this node does not have it: such a
// session gets no writes from this runner.
func (r *Runner) adapterLocked(s *fsmpb.Session) Adapter {
	name := s.GetPlacement().GetRuntimeAdapter()
	if name == "" {
		name = fsm.DefaultRuntimeAdapter
	}
	if name == fsm.ExternalRuntime {
		return nil // served by the provider process where it was launched
	}
	if a := r.adapters[name]; a != nil {
		return a
	}
	if r.warned[s.SessionId] != name {
		r.warned[s.SessionId] = name
		r.logger.Warn("session placed here with an unknown runtime adapter; not running it",
			"session", s.SessionId, "epoch", s.Epoch, "adapter", name)
	}
	return nil
}

func (r *Runner) adapter(s *fsmpb.Session) Adapter {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.adapterLocked(s)
}
