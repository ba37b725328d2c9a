package node

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fak-dev/fak/api"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The move controller (DESIGN.md §8) runs on the leader and drives every
// open move from FSM state, one committed command per arrow:
//
//	SAFE_POINT_REQUESTED  wait for the source runner's checkpoint until the
//	                      safe-point timeout, then MOVE_UNSAFE; a recovery's
//	                      checkpoint is the controller's own, at the head
//	CHECKPOINTED          admit a destination (placement.Choose over the
//	                      node records, gossip status and loads) or fail
//	                      naming every refused check
//	DESTINATION_ADMITTED  wait for the destination runner's restore; fail
//	                      at once if gossip says it is not alive, or after
//	                      RestoreTimeout
//	RESTORED              cut over
//
// It keeps no state about moves: deadlines run from the move's
// state_unix_nano (the leader-stamped time of its last transition) and
// each step's request id derives from the move, so a new leader continues
// every open move where the old one left it, and a step retried across an
// election is applied once.
//
// It also opens moves: a node dead in gossip for longer than RecoverAfter
// has each of its active sessions moved (cause recovery, no safe point:
// the checkpoint is the last committed address, and the epoch bump fences
// the lost node); a draining node has its sessions moved away one at a
// time (cause drain). A session whose policy says recover=manual is not
// moved by recovery: it is marked stranded (MarkStranded) for an operator
// to move by hand, and unmarked when its node is alive again. A session whose recovery or drain move failed is
// tried again after moveRetryPause, and only when some node would admit it.
const (
	// DefaultRecoverAfter: how long a node must be dead in gossip before
	// its sessions are recovered elsewhere.
	DefaultRecoverAfter = 30 * time.Second
	// RestoreTimeout bounds the wait for the destination's restore.
	RestoreTimeout = 10 * time.Second

	// moveTick: a pass at least this often, and after applied batches,
	// at least moveMinInterval and moveCostFactor times the last pass's
	// reading apart (a pass reads every session record, like the runner's
	// scan; this keeps it near a tenth of a core on a large fleet under
	// load).
	moveTick        = 100 * time.Millisecond
	moveMinInterval = 5 * time.Millisecond
	moveCostFactor  = 10
	moveApplyTime   = 5 * time.Second
	moveRetryPause  = 10 * time.Second
)

// mover is the controller's loop state: only what gossip alone tells.
type mover struct {
	n            *Node
	recoverAfter time.Duration
	// unseen: nodes with a record gossip has not shown this leader, since
	// when (like the Raft reconcile's missing servers).
	unseen map[string]time.Time
	// stuck: sessions of a dead or draining node that no node admitted at
	// the last pass, with their node and the refusals: each refusal is
	// logged once, and DrainStatus reports them (stuckMu: read by the API).
	stuckMu sync.Mutex
	stuck   map[string]stuckSession
}

// stuckSession is a session no node admits: where it is and why.
type stuckSession struct{ node, refusals string }

// setStuck publishes the last pass's stuck sessions (nil: none, this node
// does not lead).
func (mv *mover) setStuck(stuck map[string]stuckSession) {
	mv.stuckMu.Lock()
	defer mv.stuckMu.Unlock()
	mv.stuck = stuck
}

// blocked lists the sessions of node that no node admitted at the
// controller's last pass (sorted by session), for DrainStatus.
func (mv *mover) blocked(node string) []api.BlockedSession {
	mv.stuckMu.Lock()
	defer mv.stuckMu.Unlock()
	var out []api.BlockedSession
	for id, st := range mv.stuck {
		if st.node == node {
			out = append(out, api.BlockedSession{SessionID: id, Refusals: st.refusals})
		}
	}
	slices.SortFunc(out, func(a, b api.BlockedSession) int { return strings.Compare(a.SessionID, b.SessionID) })
	return out
}

func newMover(n *Node) *mover {
	ra := n.cfg.RecoverAfter
	if ra == 0 {
		ra = DefaultRecoverAfter
	}
	return &mover{n: n, recoverAfter: ra, unseen: map[string]time.Time{}}
}

func (mv *mover) run(ctx context.Context) {
	t := time.NewTicker(moveTick)
	defer t.Stop()
	for {
		started := time.Now()
		var changed <-chan struct{}
		var cost time.Duration
		var cursor uint64
		if mv.n.cluster.IsLeader() {
			changed = mv.n.fsm.Changed()
			cursor = mv.n.fsm.ChangeCursor()
			cost = mv.pass(ctx)
		} else {
			clear(mv.unseen)
			mv.setStuck(nil)
		}
		urgent := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-changed:
			urgent = mv.stepDue(cursor)
		}
		wait := max(moveMinInterval, moveCostFactor*cost)
		if urgent {
			wait = moveCostFactor * cost
		}
		if d := wait - time.Since(started); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
	}
}

// stepDue reports whether an entry applied since cursor left a move
// waiting on the controller itself (CHECKPOINTED: admit; RESTORED: cut
// over). Then the next pass is paced by its cost alone, not also by
// moveMinInterval: those two steps are on every move's critical path, and
// nothing else would take them sooner. A feed that lost track counts as
// due.
func (mv *mover) stepDue(cursor uint64) bool {
	changes, _, ok := mv.n.fsm.ChangesSince(cursor)
	if !ok {
		return true
	}
	for _, ch := range changes {
		if ch.Node != "" {
			continue
		}
		s, err := mv.n.fsm.Session(ch.SessionID)
		if err != nil || !fsm.MoveOpen(s.Move) {
			continue
		}
		if st := s.Move.State; st == fsm.MoveCheckpointed || st == fsm.MoveRestored {
			return true
		}
	}
	return false
}

// nodeView is one node as the controller sees it in a pass.
type nodeView struct {
	rec    *fsmpb.NodeRecord
	status string    // gossip: alive, dead, left, or unknown
	since  time.Time // when it entered that status (unknown: first noticed)
}

// pass reads the FSM and gossip once and takes every step due. It returns
// how long reading and planning took (not committing).
func (mv *mover) pass(ctx context.Context) (cost time.Duration) {
	started := time.Now()
	n := mv.n
	members := n.cluster.Members()
	recs, err := n.fsm.Nodes()
	if err != nil {
		n.logger.Warn("move controller: reading node records", "error", err)
		return 0
	}
	if n.registerNodes(ctx, members, recs) {
		if recs, err = n.fsm.Nodes(); err != nil {
			return 0
		}
	}
	now := time.Now()
	views := mv.views(now, members, recs)
	recovering, draining := map[string]bool{}, map[string]bool{}
	on := map[string]bool{}
	for name, v := range views {
		switch {
		case v.status != cluster.StatusAlive && name != n.cfg.Name && now.Sub(v.since) >= mv.recoverAfter:
			recovering[name], on[name] = true, true
		case v.status == cluster.StatusAlive && v.rec.Draining:
			draining[name], on[name] = true, true
		}
	}
	load, moving, hosted, err := n.fsm.PlacementScan(on)
	if err != nil {
		n.logger.Warn("move controller: scanning sessions", "error", err)
		return 0
	}
	// A destination counts the sessions admitted to it and not yet cut over.
	busySource := map[string]bool{}
	for _, s := range moving {
		if m := s.Move; m.State == fsm.MoveAdmitted || m.State == fsm.MoveRestored {
			load[m.Admitted.GetNode()]++
		}
		busySource[s.GetPlacement().GetNode()] = true
	}
	// Plan every step in one sequential pass (admissions update the loads
	// as they go), then commit them concurrently: the leader coalesces
	// concurrent commands into few Raft entries.
	var steps []*step
	stuck := map[string]stuckSession{}
	for _, s := range moving {
		if st := mv.drive(now, s, views, recs, load); st != nil {
			steps = append(steps, st)
		}
	}
	// Recovery and drain open new moves; recover=manual sessions are
	// marked stranded instead, and unmarked when their node is back.
	for _, s := range hosted {
		node := s.GetPlacement().GetNode()
		if fsm.MoveOpen(s.Move) {
			continue
		}
		switch {
		case s.Stranded && !recovering[node]:
			if views[node].status == cluster.StatusAlive || node != s.StrandedNode {
				steps = append(steps, mv.strand(s, s.StrandedNode, false))
			}
		case recovering[node] && s.RecoverManual:
			if !s.Stranded {
				steps = append(steps, mv.strand(s, node, true))
			}
		case recovering[node]:
			if mv.retryPaused(now, s, fsm.MoveCauseRecovery) || !mv.admissible(s, views, recs, load, stuck) {
				continue
			}
			steps = append(steps, mv.open(s, fsm.MoveCauseRecovery))
		case draining[node] && !busySource[node]:
			if mv.retryPaused(now, s, fsm.MoveCauseDrain) || !mv.admissible(s, views, recs, load, stuck) {
				continue
			}
			steps = append(steps, mv.open(s, fsm.MoveCauseDrain))
			busySource[node] = true // one at a time
		}
	}
	mv.setStuck(stuck)
	cost = time.Since(started)
	mv.commit(ctx, steps)
	return cost
}

// step is one command the controller commits for one session's move.
type step struct {
	s    *fsmpb.Session
	name string // request, checkpoint, admit, cutover, fail
	cmd  *fsmpb.Command
	// requestID: derived from the move and the step (see stepID).
	requestID string
	done      func() // logs what was committed
}

// stepConcurrency bounds the commands one pass has in flight.
const stepConcurrency = 64

func (mv *mover) commit(ctx context.Context, steps []*step) {
	sem := make(chan struct{}, stepConcurrency)
	var wg sync.WaitGroup
	for _, st := range steps {
		if ctx.Err() != nil || !mv.n.cluster.IsLeader() {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			mv.apply(ctx, st)
		}()
	}
	wg.Wait()
}

// apply commits one step. A transient failure (leadership lost, shutting
// down) leaves the move to the next pass or leader; the FSM refusing a step
// the move is still waiting for fails the move, so no move ever hangs on a
// command that cannot commit.
func (mv *mover) apply(ctx context.Context, st *step) {
	err := mv.n.applyMoveCommand(ctx, st.requestID, st.cmd)
	var fe *fsm.Error
	switch {
	case err == nil:
		if st.done != nil {
			st.done()
		}
	case !errors.As(err, &fe):
		mv.n.logger.Debug("move controller: step not committed", "session", st.s.SessionId, "step", st.name, "error", err)
	case fe.Reason == fsm.ReasonMoveState || st.name == "fail" || st.name == "request" || st.name == "strand":
		// The move moved on or ended meanwhile (the next pass sees it), or
		// a new move was refused (BUSY: another move opened first).
		mv.n.logger.Debug("move controller: step refused", "session", st.s.SessionId, "step", st.name, "error", err)
	default:
		mv.apply(ctx, mv.fail(st.s, st.name+" refused: "+fe.Error(), false))
	}
}

// views joins every node record with its gossip status.
func (mv *mover) views(now time.Time, members []cluster.Member, recs []*fsmpb.NodeRecord) map[string]nodeView {
	byName := make(map[string]cluster.Member, len(members))
	for _, m := range members {
		byName[m.Name] = m
	}
	out := make(map[string]nodeView, len(recs))
	for _, rec := range recs {
		v := nodeView{rec: rec, status: "unknown"}
		if m, ok := byName[rec.Name]; ok && m.Status != "" {
			v.status, v.since = m.Status, m.Since
			delete(mv.unseen, rec.Name)
		} else {
			if _, ok := mv.unseen[rec.Name]; !ok {
				mv.unseen[rec.Name] = now
			}
			v.since = mv.unseen[rec.Name]
		}
		if rec.Name == mv.n.cfg.Name {
			v.status = cluster.StatusAlive // this node leads; it is alive
		}
		out[rec.Name] = v
	}
	return out
}
