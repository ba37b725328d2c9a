package runner

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/workspace"
)

// DefaultScanInterval is the least time between two full scans of the
// replica (reads of every session; changes between them are followed
// through the FSM's change feed). On top of it, the pause after a scan is
// at least scanCostFactor times the scan's duration, so scanning a large
// fleet takes a bounded share of a core (about 1/scanCostFactor).
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
	// Workspaces is this node's store of workspace snapshots (chunks and
	// manifests, content-addressed): a move's checkpoint snapshots the
	// source's workspace into it, a destination fills it from the source
	// and materializes the workspace from it. nil: workspaces do not move.
	Workspaces *workspace.Store
	// Sources reaches another node's store (nil: workspaces do not move).
	Sources func(node string) (WorkspaceSource, error)
	// MaxWorkspaceBytes bounds a workspace snapshot or restore (0: no
	// limit): past it the move fails, refused.
	MaxWorkspaceBytes int64
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
	// synced is 1 + the FSM restore count at this runner's first
	// successful read barrier (0: none yet). From then on the local
	// replica is at least as new as anything committed before this
	// process started, and only moves forward until a snapshot restore.
	synced atomic.Uint64

	mu     sync.Mutex
	hosts  map[string]*host
	warned map[string]string // session → adapter name already warned about
	kicked []string          // sessions whose worker ended since the loop last looked
	// early: move-step views that arrived while the replica lacked more
	// than the step's event, by session; taken up when it applies the rest.
	early  map[string]*fsmpb.Session
	copies map[string]*copyState // workspace copies in flight, by session
}

// host is the runner's record of one session it serves.
type host struct {
	busy     bool      // a worker owns the session (and its runtime)
	retryAt  time.Time // after a failed worker, not before this
	epoch    uint64    // epoch of runtime
	resetSeq uint64    // the reset boundary runtime's context starts after
	restores uint64    // the FSM's restore count when runtime started
	runtime  Runtime   // nil until the first turn of the epoch (or of the context after a reset)
	// written is the highest seq the runner's writes for the session
	// committed: a worker's pass waits until the local replica holds it.
	written atomic.Uint64
}

// wrote notes that a write for the session committed up to seq.
func (h *host) wrote(seq uint64) {
	for {
		cur := h.written.Load()
		if seq <= cur || h.written.CompareAndSwap(cur, seq) {
			return
		}
	}
}

func (h *host) lastWritten() uint64 { return h.written.Load() }

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
	// A consider that started before the cancel has added its worker to
	// wg once this lock is free; later ones see the cancel.
	r.mu.Lock()
	r.mu.Unlock()
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

// rescanInterval is how often the runner reads every session even when
// the change feed says nothing changed: a safety net, not the way work is
// found.
const rescanInterval = 10 * time.Second

// loop reads every session at start, then only the sessions the FSM's
// change feed names as written, as soon as each batch is applied, and the
// session of each worker that ends (it may have left work behind). It
// reads everything again when the feed cannot say what changed (a
// restore, a reader too far behind), when a paused session may be retried,
// and every rescanInterval — at most once per ScanInterval, longer for a
// slow scan.
func (r *Runner) loop() {
	defer r.wg.Done()
	f := r.cfg.FSM
	throttle := time.NewTimer(0)
	defer throttle.Stop()
	rescan := time.NewTicker(rescanInterval)
	defer rescan.Stop()
	var retryAt time.Time
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	// retryBy makes the retry timer fire by t at the latest.
	retryBy := func(t time.Time) {
		if t.IsZero() || !retryAt.IsZero() && !t.Before(retryAt) {
			return
		}
		retryAt = t
		retry.Reset(time.Until(t))
	}
	for {
		changed := f.Changed()
		cursor := f.ChangeCursor()
		started := time.Now()
		retryAt = time.Time{}
		retry.Stop()
		retryBy(r.scan())
		throttle.Reset(max(r.cfg.ScanInterval, scanCostFactor*time.Since(started)) - time.Since(started))
		throttled, due := true, false
		for throttled || !due {
			select {
			case <-r.ctx.Done():
				return
			case <-throttle.C:
				throttled = false
			case <-retry.C:
				due, retryAt = true, time.Time{}
			case <-rescan.C:
				due = true
			case <-r.kick:
				retryBy(r.reconsider(r.takeKicked()))
			case <-changed:
				changed = f.Changed()
				changes, next, ok := f.ChangesSince(cursor)
				cursor = next
				if !ok {
					due = true
					continue
				}
				ids := make([]string, 0, len(changes))
				for _, c := range changes {
					ids = append(ids, c.SessionID)
				}
				retryBy(r.reconsider(ids))
			}
		}
	}
}

// retried (zero: none).
func (r *Runner) reconsider(ids []string) (wake time.Time) {
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		s, err := r.cfg.FSM.Session(id)
		if err != nil {
			continue // gone: the next full scan forgets it
		}
		if w := r.consider(s); !w.IsZero() && (wake.IsZero() || w.Before(wake)) {
			wake = w
		}
	}
	return wake
}

// kickSession asks the loop to reconsider a session (its worker ended).
func (r *Runner) kickSession(id string) {
	r.mu.Lock()
	r.kicked = append(r.kicked, id)
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *Runner) takeKicked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := r.kicked
	r.kicked = nil
	return ids
}

// scan starts a worker for every session of this node with work and none
// running. It reads only session records, never journals: an idle session
// costs one decode. It returns the earliest time a paused session may be
// retried (zero: none).
func (r *Runner) scan() (wake time.Time) {
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
			return time.Now().Add(failurePause)
		}
		for _, s := range page {
			if seen != nil {
				seen[s.SessionId] = true
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
			return wake
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
	if view := r.takeEarly(s); view != nil {
		return r.considerView(view, view)
	}
	return r.considerView(s, nil)
}

// considerView is consider; a worker it starts takes view (not nil: the
// session as a runner hint rebuilt it, ahead of the replica) for its
// first pass.
func (r *Runner) considerView(s, view *fsmpb.Session) (wake time.Time) {
	ours := r.ours(s)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil {
		return time.Time{} // stopping: no new worker
	}
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
	go r.work(s.SessionId, h, view)
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
