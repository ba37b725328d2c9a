package fsm

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The move state machine (DESIGN.md §8). Every arrow is one command and one
// move.* event; the controller on the leader drives them, runners commit
// the checkpoint (source) and the restore (destination):
//
//	RUNNING -> SAFE_POINT_REQUESTED -> CHECKPOINTED -> DESTINATION_ADMITTED
//	        -> RESTORED -> CUTOVER_COMMITTED -> RUNNING
//
// and, before cutover, MOVE_FAILED or MOVE_UNSAFE, leaving the source epoch
// current. The epoch bump at cutover fences the old runner (STALE_EPOCH).

// Move states.
const (
	MoveSafePointRequested = "SAFE_POINT_REQUESTED"
	MoveCheckpointed       = "CHECKPOINTED"
	MoveAdmitted           = "DESTINATION_ADMITTED"
	MoveRestored           = "RESTORED"
	MoveCutoverCommitted   = "CUTOVER_COMMITTED"
	MoveFailed             = "MOVE_FAILED"
	MoveUnsafe             = "MOVE_UNSAFE"
)

// Move causes.
const (
	MoveCauseOperator = "operator"
	MoveCauseDrain    = "drain"
	MoveCauseRecovery = "recovery"
)

// DefaultSafePointTimeout is how long the source runner may take to reach
// a safe point when the move names no timeout (a RequestMove with
// safe_point_timeout 0): the API proposes it, the controller on the leader
// fails the move as unsafe after it.
const DefaultSafePointTimeout = 30 * time.Second

// MoveOpen reports whether m is a move in progress.
func MoveOpen(m *fsmpb.Move) bool {
	if m == nil {
		return false
	}
	switch m.State {
	case MoveSafePointRequested, MoveCheckpointed, MoveAdmitted, MoveRestored:
		return true
	}
	return false
}

// JournalDigest is the checkpoint digest: SHA-256 over the events 1..seq
// (seq, kind, text, data of each), hex. Source and destination compute it
// from their own replicas; equal digests mean equal journals.
func JournalDigest(events []*fsmpb.Event) string {
	h := sha256.New()
	for _, e := range events {
		hashJournalEvent(h, e)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (a *applier) openMove(cmdSession, moveID string, want string) (*fsmpb.Session, *Error) {
	s, err := a.loadSession(cmdSession)
	if err != nil {
		return nil, err
	}
	if err := activeSession(s); err != nil {
		return nil, err
	}
	m := s.Move
	if !MoveOpen(m) || m.MoveId != moveID {
		return nil, errorf(ReasonMoveState, "session %s has no open move %s", s.SessionId, moveID)
	}
	if want != "" && m.State != want {
		return nil, errorf(ReasonMoveState, "move %s is %s, not %s", moveID, m.State, want)
	}
	return s, nil
}

// transition moves s.Move to state and journals kind.
func (a *applier) transition(c *fsmpb.Command, s *fsmpb.Session, state, kind, text string, f moveFact) {
	m := s.Move
	m.State = state
	m.StateUnixNano = c.TimeUnixNano
	f.MoveID, f.State = m.MoveId, state
	f.ElapsedNanos = c.TimeUnixNano - m.RequestedUnixNano
	s.UpdatedUnixNano = c.TimeUnixNano
	a.putEvents(newEvent(s, c, kind, text, fact(f)))
	a.putSession(s)
}

func moveResult(s *fsmpb.Session) *fsmpb.Result {
	return &fsmpb.Result{Body: &fsmpb.Result_Session{Session: s}}
}

func (a *applier) requestMove(c *fsmpb.Command, cmd *fsmpb.RequestMove) (*fsmpb.Result, *Error) {
	if cmd.MoveId == "" || len(cmd.MoveId) > MaxSessionIDBytes {
		return nil, errorf(ReasonInvalidArgument, "move id must be 1-%d bytes", MaxSessionIDBytes)
	}
	switch cmd.Cause {
	case MoveCauseOperator, MoveCauseDrain, MoveCauseRecovery:
	default:
		return nil, errorf(ReasonInvalidArgument, "move cause must be operator, drain or recovery")
	}
	target := cmd.Target
	if target == nil {
		target = &fsmpb.Placement{}
	}
	if IsExternal(target) {
		return nil, errorf(ReasonInvalidArgument, "a move cannot make a session %s: fak guard binds that runtime", ExternalRuntime)
	}
	if err := validPlacement(target); err != nil {
		return nil, err
	}
	if cmd.SafePointTimeoutNanos < 0 || cmd.SafePointTimeoutNanos > MaxTTL {
		return nil, errorf(ReasonInvalidArgument, "safe-point timeout must be at most 10m")
	}
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	if s.Move != nil && s.Move.MoveId == cmd.MoveId {
		return &fsmpb.Result{NoOp: true, Body: &fsmpb.Result_Session{Session: s}}, nil
	}
	if err := activeSession(s); err != nil {
		return nil, err
	}
	if err := refuseExternal(s, "a move"); err != nil {
		return nil, err
	}
	if MoveOpen(s.Move) {
		return nil, errorf(ReasonBusy, "move %s of session %s is in progress (%s)", s.Move.MoveId, s.SessionId, s.Move.State)
	}
	if target.Node != "" || target.RuntimeAdapter != "" {
		// The runtime the destination must have: the one named, else the
		// session's own.
		want := &fsmpb.Placement{Node: target.Node, RuntimeAdapter: cmp.Or(target.RuntimeAdapter, s.Placement.GetRuntimeAdapter())}
		if err := a.checkPlacement(want); err != nil {
			return nil, err
		}
	}
	if target.Node != "" && target.Node == s.Placement.GetNode() &&
		(target.Model == "" || target.Model == s.Placement.GetModel()) &&
		(target.Provider == "" || target.Provider == s.Placement.GetProvider()) &&
		(target.RuntimeAdapter == "" || target.RuntimeAdapter == s.Placement.GetRuntimeAdapter()) &&
		(target.AccountRef == "" || target.AccountRef == s.Placement.GetAccountRef()) {
		return nil, errorf(ReasonInvalidArgument, "session %s already runs on %s with that placement", s.SessionId, target.Node)
	}
	s.Move = &fsmpb.Move{
		MoveId: cmd.MoveId, Cause: cmd.Cause, Target: target,
		SourceNode: s.Placement.GetNode(), SourceEpoch: s.Epoch,
		RequestedUnixNano: c.TimeUnixNano, SafePointTimeoutNanos: cmd.SafePointTimeoutNanos,
		AcceptDegradation: cmd.AcceptDegradation,
	}
	a.transition(c, s, MoveSafePointRequested, KindMoveRequested, "move requested: "+s.Move.SourceNode+" → "+orAny(target.Node),
		moveFact{Cause: cmd.Cause, From: s.Move.SourceNode, To: target.Node, SourceEpoch: s.Epoch, Interrupt: cmd.Interrupt})
	if cmd.Interrupt && s.TurnInputSeq != 0 {
		// The safe point, induced: the turn in flight ends here, so the
		// source runner can checkpoint at once instead of letting it
		// finish.
		a.closeTurnInterrupted(c, s, "move "+cmd.MoveId, interruptByFact{Move: cmd.MoveId})
		a.putSession(s)
	}
	return moveResult(s), nil
}

func orAny(node string) string {
	if node == "" {
		return "any admitted node"
	}
	return node
}

// moveCheckpoint fixes the journal address the destination restores from.
// Outside a recovery it needs a safe point: no turn in flight in the
// source epoch (the source runner starts no new turn while a move is open).
func (a *applier) moveCheckpoint(c *fsmpb.Command, cmd *fsmpb.MoveCheckpoint) (*fsmpb.Result, *Error) {
	s, err := a.openMove(cmd.SessionId, cmd.MoveId, MoveSafePointRequested)
	if err != nil {
		return nil, err
	}
	if err := checkEpoch(s, cmd.SourceEpoch, "checkpoint of"); err != nil {
		return nil, err
	}
	if s.TurnInputSeq != 0 && s.Move.Cause != MoveCauseRecovery {
		return nil, errorf(ReasonBusy, "a turn is in flight (input #%d): no safe point yet", s.TurnInputSeq)
	}
	if cmd.CheckpointSeq == 0 || cmd.CheckpointSeq > s.HeadSeq || len(cmd.Digest) != 64 {
		return nil, errorf(ReasonInvalidArgument, "checkpoint needs an address within the journal (head #%d) and a SHA-256 digest", s.HeadSeq)
	}
	if w := cmd.Workspace; w != nil && (len(w.Digest) > MaxWorkspaceDigestBytes || w.Digest == "" && (w.Bytes != 0 || w.Chunks != 0)) {
		return nil, errorf(ReasonInvalidArgument, "a checkpoint's workspace names its manifest digest (at most %d bytes)", MaxWorkspaceDigestBytes)
	}
	m := s.Move
	m.CheckpointSeq, m.Digest, m.SourceEpoch = cmd.CheckpointSeq, cmd.Digest, cmd.SourceEpoch
	m.Workspace = nil
	text := "checkpointed at #" + uitoa(cmd.CheckpointSeq)
	f := moveFact{SourceEpoch: s.Epoch, CheckpointSeq: cmd.CheckpointSeq, Digest: cmd.Digest}
	if w := cmd.Workspace; w.GetDigest() != "" {
		m.Workspace = &fsmpb.Workspace{Digest: w.Digest, Bytes: w.Bytes, Chunks: w.Chunks, SnapshotNanos: max(w.SnapshotNanos, 0)}
		f.Workspace = &workspaceFact{Digest: w.Digest, Bytes: w.Bytes, Chunks: w.Chunks, SnapshotNanos: max(w.SnapshotNanos, 0)}
		if w.Bytes > 0 {
			text += ", workspace " + uitoa(w.Bytes) + " bytes in " + uitoa(uint64(w.Chunks)) + " chunks"
		}
	}
	if m.Cause == MoveCauseRecovery && m.Workspace == nil {
		text += recoveryWorkspace(s, m)
		if m.Workspace != nil {
			f.Workspace = &workspaceFact{Digest: m.Workspace.Digest, Bytes: m.Workspace.Bytes, Chunks: m.Workspace.Chunks}
		}
		f.WorkspaceFrom, f.WorkspaceReset = m.WorkspaceFrom, m.WorkspaceReset
	}
	a.transition(c, s, MoveCheckpointed, KindMoveCheckpointed, text, f)
	return moveResult(s), nil
}

func (a *applier) moveAdmit(c *fsmpb.Command, cmd *fsmpb.MoveAdmit) (*fsmpb.Result, *Error) {
	s, err := a.openMove(cmd.SessionId, cmd.MoveId, MoveCheckpointed)
	if err != nil {
		return nil, err
	}
	p := cmd.Placement
	if p == nil || p.Node == "" || p.RuntimeAdapter == "" {
		return nil, errorf(ReasonInvalidArgument, "an admitted placement names its node and runtime adapter")
	}
	if err := validPlacement(p); err != nil {
		return nil, err
	}
	if len(cmd.Degradation) > 0 && !s.Move.AcceptDegradation {
		return nil, errorf(ReasonInvalidArgument, "the move degrades the session (%v) and was not accepted", cmd.Degradation)
	}
	m := s.Move
	a.stampApprovals(p)
	m.Admitted, m.Checks, m.Degradation = p, cmd.Checks, cmd.Degradation
	pf := placementFactOf(p)
	a.transition(c, s, MoveAdmitted, KindMoveAdmitted, "destination "+p.Node+" admitted",
		moveFact{To: p.Node, Placement: &pf, Checks: cmd.Checks, Degradation: cmd.Degradation})
	return moveResult(s), nil
}

func (a *applier) moveRestore(c *fsmpb.Command, cmd *fsmpb.MoveRestore) (*fsmpb.Result, *Error) {
	s, err := a.openMove(cmd.SessionId, cmd.MoveId, MoveAdmitted)
	if err != nil {
		return nil, err
	}
	if err := checkNextEpoch(s, cmd.NewEpoch); err != nil {
		return nil, err
	}
	if cmd.Digest != s.Move.Digest {
		return nil, errorf(ReasonDigestMismatch, "restored journal digest %s differs from the checkpoint's %s", cmd.Digest, s.Move.Digest)
	}
	s.Move.NewEpoch = cmd.NewEpoch
	s.MaxEpoch = cmd.NewEpoch
	f := moveFact{To: s.Move.Admitted.GetNode(), NewEpoch: cmd.NewEpoch, Digest: cmd.Digest}
	text := "restored on " + s.Move.Admitted.GetNode() + " as epoch " + uitoa(cmd.NewEpoch)
	if t := cmd.Transfer; t != nil {
		s.Move.Transfer = &fsmpb.WorkspaceTransfer{BytesSent: t.BytesSent, BytesPresent: t.BytesPresent, ChunksSent: t.ChunksSent,
			ChunksPresent: t.ChunksPresent, FetchNanos: max(t.FetchNanos, 0), RestoreNanos: max(t.RestoreNanos, 0)}
		f.Transfer = &transferFact{BytesSent: t.BytesSent, BytesPresent: t.BytesPresent, ChunksSent: t.ChunksSent,
			ChunksPresent: t.ChunksPresent, FetchNanos: max(t.FetchNanos, 0), RestoreNanos: max(t.RestoreNanos, 0)}
		if t.BytesSent+t.BytesPresent > 0 {
			text += ", workspace: " + uitoa(t.BytesSent) + " bytes sent, " + uitoa(t.BytesPresent) + " already there"
		}
	}
	s.Move.CacheLineage = cacheLineage(s, s.Move.Admitted)
	f.Cache = cacheFactOf(s.Move.CacheLineage)
	text += "; " + cacheText(s.Move.CacheLineage)
	a.transition(c, s, MoveRestored, KindMoveRestored, text, f)
	return moveResult(s), nil
}

// moveCutover makes the restored epoch current: from this entry on, only
// the destination's runner may write.
func (a *applier) moveCutover(c *fsmpb.Command, cmd *fsmpb.MoveCutover) (*fsmpb.Result, *Error) {
	s, err := a.openMove(cmd.SessionId, cmd.MoveId, MoveRestored)
	if err != nil {
		return nil, err
	}
	m := s.Move
	if err := checkAboveEpoch(s, m.NewEpoch); err != nil {
		// An epoch change (fresh, resume) since the restore: the restored
		// epoch is no longer above the current one. The controller fails
		// the move; the source stays current.
		return nil, err
	}
	from := s.Placement.GetNode()
	a.unstrandAtCutover(c, s)
	s.Epoch = m.NewEpoch
	s.Placement = proto.Clone(m.Admitted).(*fsmpb.Placement)
	if w := m.Workspace; w != nil && m.WorkspaceFrom == "" {
		// The source holds the workspace it sent: the session's copy
		// until the new host ships one of its own.
		s.WorkspaceCopy = &fsmpb.WorkspaceCopy{Workspace: proto.Clone(w).(*fsmpb.Workspace), Node: m.SourceNode,
			Epoch: m.NewEpoch, AfterInput: m.CheckpointSeq, TurnsCompleted: s.TurnsCompleted}
	}
	if p := s.Placement.Provider; !s.ProviderThread || p != "" && p != s.Provider {
		// A runtime's provider thread moves with the session (the next
		// turn resumes it on the destination); another provider starts
		// its own.
		s.Provider, s.ProviderThread = p, false
	}
	s.MovesCompleted++
	s.UpdatedUnixNano = c.TimeUnixNano
	a.putEvents(newEvent(s, c, KindEpochChanged, epochText(s.Epoch, s.Placement)+" (move)", fact(epochChangeFact{
		Epoch: s.Epoch, Placement: placementFactOf(s.Placement), Reason: "move",
	})))
	a.transition(c, s, MoveCutoverCommitted, KindMoveCutover, "cutover: "+from+" → "+s.Placement.Node,
		moveFact{From: from, To: s.Placement.Node, NewEpoch: s.Epoch, Cause: m.Cause})
	return moveResult(s), nil
}

func (a *applier) moveFail(c *fsmpb.Command, cmd *fsmpb.MoveFail) (*fsmpb.Result, *Error) {
	if len(cmd.Reason) > MaxReasonBytes {
		return nil, errorf(ReasonInvalidArgument, "reason longer than %d bytes", MaxReasonBytes)
	}
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	if m := s.Move; m != nil && m.MoveId == cmd.MoveId && !MoveOpen(m) {
		return &fsmpb.Result{NoOp: true, Body: &fsmpb.Result_Session{Session: s}}, nil // already ended
	}
	if s, err = a.openMove(cmd.SessionId, cmd.MoveId, ""); err != nil {
		return nil, err
	}
	m := s.Move
	m.Reason, m.Phase = cmd.Reason, m.State
	state, kind := MoveFailed, KindMoveFailed
	if cmd.Unsafe {
		state, kind = MoveUnsafe, KindMoveUnsafe
	}
	a.transition(c, s, state, kind, state+" in "+m.Phase+": "+cmd.Reason,
		moveFact{Reason: cmd.Reason, Phase: m.Phase, From: m.SourceNode, To: m.Admitted.GetNode()})
	return moveResult(s), nil
}

func uitoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

// endOpenMove closes a move left open when its session stops (stop, clear,
// new), with a move.failed event before the stop, so the journal never
// shows a move going on in a stopped session.
func (a *applier) endOpenMove(c *fsmpb.Command, s *fsmpb.Session, reason string) {
	if !MoveOpen(s.Move) {
		return
	}
	m := s.Move
	m.Reason, m.Phase = reason, m.State
	m.State, m.StateUnixNano = MoveFailed, c.TimeUnixNano
	a.putEvents(newEvent(s, c, KindMoveFailed, MoveFailed+" in "+m.Phase+": "+reason, fact(moveFact{
		MoveID: m.MoveId, State: MoveFailed, Reason: reason, Phase: m.Phase, From: m.SourceNode,
		ElapsedNanos: c.TimeUnixNano - m.RequestedUnixNano,
	})))
}
