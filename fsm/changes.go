package fsm

import (
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The change feed tells readers which sessions the last applied entries
// wrote, so a runner reacts to one session's input without reading every
// session, and the leader knows when a follower's runner waits for a
// commit. It is a side channel of Apply, like Changed: not replicated
// state, and not part of any decision Apply takes.

// SessionChange is one session written by an applied batch.
type SessionChange struct {
	SessionID string
	// Node is the node whose runner the session waits for after the
	// write: its placement's node; during a move, the source until its
	// checkpoint, the destination once admitted, and none while the leader's
	// controller holds the next step ("").
	Node string
	// NeedsRunner: a command other than the session's runner's own events
	// and charges wrote it (an input, an interrupt, a move step, a stop):
	// the runner on Node may have something to do.
	NeedsRunner bool
}

// changeFeedSize bounds the changes kept. A reader further behind (or
// behind a restore) is told to read everything again.
const changeFeedSize = 8192

type changeFeed struct {
	mu    sync.Mutex
	ring  [changeFeedSize]SessionChange
	next  uint64 // cursor after the newest change
	floor uint64 // cursors below it cannot be served (a restore)
}

// ChangeCursor is the cursor of the next change: ChangesSince(cursor)
// returns what is applied from now on.
func (f *FSM) ChangeCursor() uint64 {
	f.changes.mu.Lock()
	defer f.changes.mu.Unlock()
	return f.changes.next
}

// ChangesSince returns the sessions written since cursor (oldest first, a
// session once per applied batch) and the cursor to pass next time. ok is
// false when they are no longer known — the reader fell more than
// changeFeedSize changes behind, or a snapshot was restored since — and
// the reader must read the sessions it cares about again.
func (f *FSM) ChangesSince(cursor uint64) (changes []SessionChange, next uint64, ok bool) {
	c := &f.changes
	c.mu.Lock()
	defer c.mu.Unlock()
	if cursor < c.floor || c.next-cursor > changeFeedSize || cursor > c.next {
		return nil, c.next, false
	}
	for i := cursor; i < c.next; i++ {
		changes = append(changes, c.ring[i%changeFeedSize])
	}
	return changes, c.next, true
}

func (c *changeFeed) publish(changes []SessionChange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range changes {
		c.ring[c.next%changeFeedSize] = ch
		c.next++
	}
}

// reset makes every earlier cursor unservable (after a restore): the
// restore is a change the feed cannot describe.
func (c *changeFeed) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	c.floor = c.next
}

// touched records, during one batch, the sessions written, once each.
type touched struct {
	index map[string]int
	list  []SessionChange
}

func (t *touched) add(s *fsmpb.Session, needsRunner bool) {
	if t.index == nil {
		t.index = make(map[string]int)
	}
	ch := SessionChange{SessionID: s.SessionId, Node: runnerNode(s), NeedsRunner: needsRunner}
	if i, ok := t.index[s.SessionId]; ok {
		ch.NeedsRunner = ch.NeedsRunner || t.list[i].NeedsRunner
		t.list[i] = ch
		return
	}
	t.index[s.SessionId] = len(t.list)
	t.list = append(t.list, ch)
}

// runnerNode is the node whose runner s waits for (SessionChange.Node).
func runnerNode(s *fsmpb.Session) string {
	m := s.Move
	if !MoveOpen(m) {
		return s.GetPlacement().GetNode()
	}
	switch m.State {
	case MoveSafePointRequested:
		return s.GetPlacement().GetNode() // the source's checkpoint
	case MoveAdmitted:
		return m.Admitted.GetNode() // the destination's restore
	}
	return "" // the controller's admission or cutover
}

// runnersOwnWrite: commands a session's runner makes for itself (its
// events, usage charges), which give it nothing new to do.
func runnersOwnWrite(c *fsmpb.Command) bool {
	switch c.Body.(type) {
	case *fsmpb.Command_RunnerAppend, *fsmpb.Command_RecordUsage:
		return true
	}
	return false
}

// NextTurnInput reports the input the next turn of s starts on when that
// input is the newest event of the journal, no turn runs and no move is
// open: the state a runner on another node is told about at once (a
// runner hint) and can rebuild from its replica one event behind
// (WithInput).
func NextTurnInput(s *fsmpb.Session) (seq uint64, ok bool) {
	if s.State != fsmpb.SessionState_SESSION_STATE_ACTIVE || s.TurnInputSeq != 0 || MoveOpen(s.Move) ||
		len(s.QueuedInputs) != 1 || s.QueuedInputs[0] != s.HeadSeq {
		return 0, false
	}
	return s.HeadSeq, true
}

// RunnerMoveStep names the node whose runner an open move of s waits
// for, when that runner can take its step from s alone: the source's
// checkpoint (no turn in flight, not a recovery) or the destination's
// restore. "" when there is none. Such a runner may act on s as a leader
// sent it (a hint) before its replica applies the step's event; it checks
// that this event is all its replica lacks.
func RunnerMoveStep(s *fsmpb.Session) string {
	m := s.Move
	if s.State != fsmpb.SessionState_SESSION_STATE_ACTIVE || !MoveOpen(m) {
		return ""
	}
	switch {
	case m.State == MoveSafePointRequested && m.Cause != MoveCauseRecovery && s.TurnInputSeq == 0:
		return s.GetPlacement().GetNode()
	case m.State == MoveAdmitted:
		return m.Admitted.GetNode()
	}
	return ""
}

// WithInput is s as it is once the input at seq, the next event of its
// journal, is applied: what submitting input changes (the queue and the
// head), when s has no turn running, nothing queued and no open move.
// ok is false when s is not in that state.
func WithInput(s *fsmpb.Session, epoch, seq uint64) (*fsmpb.Session, bool) {
	if s.State != fsmpb.SessionState_SESSION_STATE_ACTIVE || s.Epoch != epoch || s.HeadSeq+1 != seq ||
		s.TurnInputSeq != 0 || len(s.QueuedInputs) != 0 || MoveOpen(s.Move) {
		return nil, false
	}
	next := proto.Clone(s).(*fsmpb.Session)
	next.HeadSeq, next.QueuedInputs = seq, []uint64{seq}
	return next, true
}
