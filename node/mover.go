package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/api"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/placement"
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

func candidates(views map[string]nodeView, recs []*fsmpb.NodeRecord, load map[string]int) []placement.Candidate {
	out := make([]placement.Candidate, 0, len(recs))
	for _, rec := range recs {
		out = append(out, placement.Candidate{Record: rec, Status: views[rec.Name].status, Load: load[rec.Name]})
	}
	return out
}

func (mv *mover) request(s *fsmpb.Session) placement.Request {
	req := placement.Request{Session: s, ContextTokens: func() uint64 { return mv.contextTokens(s) }}
	if m := s.Move; fsm.MoveOpen(m) {
		req.Target, req.AcceptDegradation = m.Target, m.AcceptDegradation
	}
	if s.EnvelopeId != "" {
		if env, err := mv.n.fsm.Envelope(s.EnvelopeId); err == nil {
			req.Envelope = env
		}
	}
	return req
}

// admissible: some node would admit s now (checked before opening a
// recovery or drain move, so a fleet with nowhere to go does not fill
// journals with failed moves).
func (mv *mover) admissible(s *fsmpb.Session, views map[string]nodeView, recs []*fsmpb.NodeRecord, load map[string]int, stuck map[string]stuckSession) bool {
	_, all, ok := placement.Choose(mv.request(s), candidates(views, recs, load))
	if ok {
		return true
	}
	why := placement.Refusals("", all)
	stuck[s.SessionId] = stuckSession{node: s.GetPlacement().GetNode(), refusals: why}
	mv.stuckMu.Lock()
	logged := mv.stuck[s.SessionId].refusals == why
	mv.stuckMu.Unlock()
	if !logged {
		mv.n.logger.Warn("move controller: no node admits the session; waiting", "session", s.SessionId,
			"node", s.GetPlacement().GetNode(), "refusals", why)
	}
	return false
}

// retryPaused: the session's last move of this cause failed recently.
func (mv *mover) retryPaused(now time.Time, s *fsmpb.Session, cause string) bool {
	m := s.Move
	return m != nil && m.Cause == cause && (m.State == fsm.MoveFailed || m.State == fsm.MoveUnsafe) &&
		now.UnixNano()-m.StateUnixNano < int64(moveRetryPause)
}

// open requests a recovery or drain move of s to wherever it is admitted.
func (mv *mover) open(s *fsmpb.Session, cause string) *step {
	moveID := api.NewID("mov_")
	return &step{s: s, name: "request", requestID: stepID(moveID, "request"),
		cmd: &fsmpb.Command{Body: &fsmpb.Command_RequestMove{RequestMove: &fsmpb.RequestMove{
			SessionId: s.SessionId, MoveId: moveID, Target: &fsmpb.Placement{}, Cause: cause,
		}}},
		done: func() {
			mv.n.logger.Info("move controller: move requested", "session", s.SessionId, "move", moveID, "cause", cause,
				"from", s.GetPlacement().GetNode())
		}}
}

// strand plans marking (or unmarking) a recover=manual session of a dead
// node as stranded. Marking twice is a no-op in the FSM.
func (mv *mover) strand(s *fsmpb.Session, node string, stranded bool) *step {
	return &step{s: s, name: "strand",
		cmd: &fsmpb.Command{Body: &fsmpb.Command_MarkStranded{MarkStranded: &fsmpb.MarkStranded{
			SessionId: s.SessionId, Node: node, Stranded: stranded,
		}}},
		done: func() {
			if stranded {
				mv.n.logger.Warn("move controller: session stranded (recover=manual); move it by hand", "session", s.SessionId, "node", node)
			} else {
				mv.n.logger.Info("move controller: session no longer stranded", "session", s.SessionId, "node", node)
			}
		}}
}

// drive plans the step due for one open move (nil: nothing to do yet).
func (mv *mover) drive(now time.Time, s *fsmpb.Session, views map[string]nodeView, recs []*fsmpb.NodeRecord, load map[string]int) *step {
	m := s.Move
	inState := time.Duration(now.UnixNano() - m.StateUnixNano)
	switch m.State {
	case fsm.MoveSafePointRequested:
		if m.Cause == fsm.MoveCauseRecovery {
			return mv.checkpointRecovery(s)
		}
		timeout := time.Duration(m.SafePointTimeoutNanos)
		if timeout <= 0 {
			timeout = fsm.DefaultSafePointTimeout
		}
		if inState < timeout {
			return nil
		}
		why := fmt.Sprintf("no safe point on %s within %s", m.SourceNode, timeout)
		if s.TurnInputSeq != 0 {
			why += fmt.Sprintf(" (the turn of input #%d is still running)", s.TurnInputSeq)
		}
		return mv.fail(s, why, true)
	case fsm.MoveCheckpointed:
		d, all, ok := placement.Choose(mv.request(s), candidates(views, recs, load))
		if !ok {
			return mv.fail(s, placement.Refusals(m.Target.GetNode(), all), false)
		}
		load[d.Node]++
		return &step{s: s, name: "admit", requestID: stepID(m.MoveId, "admit"),
			cmd: &fsmpb.Command{Body: &fsmpb.Command_MoveAdmit{MoveAdmit: &fsmpb.MoveAdmit{
				SessionId: s.SessionId, MoveId: m.MoveId, Placement: d.Placement, Checks: d.Passed(), Degradation: d.Degradation,
			}}},
			done: func() {
				mv.n.metrics.moveAdmitted(m, time.Now().UnixNano())
				mv.n.logger.Info("move controller: destination admitted", "session", s.SessionId, "move", m.MoveId, "to", d.Node)
			}}
	case fsm.MoveAdmitted:
		dest := m.Admitted.GetNode()
		switch st := views[dest].status; {
		case st != cluster.StatusAlive:
			return mv.fail(s, fmt.Sprintf("destination %s is %s in gossip", dest, st), false)
		case inState >= RestoreTimeout:
			return mv.fail(s, fmt.Sprintf("destination %s did not restore within %s", dest, RestoreTimeout), false)
		}
	case fsm.MoveRestored:
		return mv.cutover(s, m)
	}
	return nil
}

// cutover plans the cutover of s's move m, restored as m says.
func (mv *mover) cutover(s *fsmpb.Session, m *fsmpb.Move) *step {
	return &step{s: s, name: "cutover", requestID: stepID(m.MoveId, "cutover"),
		cmd: &fsmpb.Command{Body: &fsmpb.Command_MoveCutover{MoveCutover: &fsmpb.MoveCutover{
			SessionId: s.SessionId, MoveId: m.MoveId,
		}}},
		done: func() {
			mv.n.metrics.moveEnded(m, "committed", time.Now().UnixNano())
			mv.n.logger.Info("move controller: cutover committed", "session", s.SessionId, "move", m.MoveId,
				"to", m.Admitted.GetNode(), "epoch", m.NewEpoch, "elapsed", time.Duration(time.Now().UnixNano()-m.RequestedUnixNano))
		}}
}

// companions is the controller's companions rule (cluster.Companion): a
// destination's restore of a move the leader holds ADMITTED is proposed
// with that move's cutover right behind it, so the cutover commits in the
// same round instead of one more after the controller sees RESTORED. The
// FSM applies them as two commands: a refused restore makes the cutover
// refused too (the move is not RESTORED), and then the controller's pass
// decides as before. The cutover's request id is the controller's own, so
// the two paths commit it once.
func (mv *mover) companions(cmd *fsmpb.Command) []cluster.Companion {
	r := cmd.GetMoveRestore()
	if r == nil {
		return nil
	}
	s, err := mv.n.fsm.Session(r.SessionId)
	if err != nil || !fsm.MoveOpen(s.Move) || s.Move.MoveId != r.MoveId || s.Move.State != fsm.MoveAdmitted {
		return nil
	}
	// The move as the restore will leave it: what the cutover's metrics
	// and log line read.
	m := proto.Clone(s.Move).(*fsmpb.Move)
	m.State, m.StateUnixNano, m.NewEpoch, m.Transfer = fsm.MoveRestored, cmd.TimeUnixNano, r.NewEpoch, r.Transfer
	st := mv.cutover(s, m)
	st.cmd.RequestId = st.requestID
	return []cluster.Companion{{Cmd: st.cmd, Done: func(res *fsmpb.Result) {
		if fsm.ResultError(res) == nil {
			st.done()
		}
	}}}
}

// checkpointRecovery plans a recovery's checkpoint at the last committed
// address of this (leader) replica: the source is gone, so there is no
// safe point to wait for; a turn it left open is closed as interrupted by
// the destination's runner after cutover.
func (mv *mover) checkpointRecovery(s *fsmpb.Session) *step {
	digest, err := mv.n.fsm.JournalDigest(s.SessionId, s.HeadSeq)
	if err != nil {
		mv.n.logger.Warn("move controller: recovery digest", "session", s.SessionId, "error", err)
		return nil
	}
	m := s.Move
	return &step{s: s, name: "checkpoint", requestID: stepID(m.MoveId, "checkpoint"),
		cmd: &fsmpb.Command{Body: &fsmpb.Command_MoveCheckpoint{MoveCheckpoint: &fsmpb.MoveCheckpoint{
			SessionId: s.SessionId, MoveId: m.MoveId, SourceEpoch: s.Epoch, CheckpointSeq: s.HeadSeq, Digest: digest,
		}}},
		done: func() {
			mv.n.logger.Info("move controller: recovery checkpoint", "session", s.SessionId, "move", m.MoveId, "seq", s.HeadSeq)
		}}
}

// fail plans ending the move before cutover: the source stays current.
func (mv *mover) fail(s *fsmpb.Session, reason string, unsafe bool) *step {
	m := s.Move
	reason = truncateUTF8(reason, fsm.MaxReasonBytes)
	state, outcome := fsm.MoveFailed, "failed"
	if unsafe {
		state, outcome = fsm.MoveUnsafe, "unsafe"
	}
	return &step{s: s, name: "fail", requestID: stepID(m.MoveId, "fail"),
		cmd: &fsmpb.Command{Body: &fsmpb.Command_MoveFail{MoveFail: &fsmpb.MoveFail{
			SessionId: s.SessionId, MoveId: m.MoveId, Reason: reason, Unsafe: unsafe,
		}}},
		done: func() {
			mv.n.metrics.moveEnded(m, outcome, time.Now().UnixNano())
			mv.n.logger.Warn("move controller: move failed; the source stays authoritative", "session", s.SessionId,
				"move", m.MoveId, "state", state, "phase", m.State, "reason", reason)
		}}
}

// applyMoveCommand proposes one controller command on this (leader) node.
// Domain refusals come back as *fsm.Error.
func (n *Node) applyMoveCommand(ctx context.Context, requestID string, cmd *fsmpb.Command) error {
	cmd.RequestId = requestID
	actx, cancel := context.WithTimeout(ctx, moveApplyTime)
	defer cancel()
	res, err := n.cluster.Apply(actx, cmd)
	if err != nil {
		return err
	}
	return fsm.ResultError(res)
}

// stepID is the request id of one controller step of a move: the same on
// every leader, so a step whose outcome was lost with a leader is applied
// once when the next leader repeats it.
func stepID(moveID, step string) string {
	sum := sha256.Sum256([]byte(moveID + "\x00" + step))
	return "mvctl_" + step + "_" + hex.EncodeToString(sum[:20])
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// contextTokens estimates the tokens of s's model context — the text of
// its inputs and outputs since the last reset — at four bytes a token:
// what a new provider conversation is rebuilt from after a move loses the
// old one.
func (mv *mover) contextTokens(s *fsmpb.Session) uint64 {
	var bytes uint64
	from := s.ResetSeq + 1
	for {
		evs, _, err := mv.n.fsm.Events(s.SessionId, from, 1000)
		if err != nil || len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			if ev.Kind == fsm.KindInput || ev.Kind == fsm.KindOutput {
				bytes += uint64(len(ev.Text))
			}
		}
		from = evs[len(evs)-1].Seq + 1
	}
	return (bytes + 3) / 4
}
