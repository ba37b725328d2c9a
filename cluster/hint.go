package cluster

import (
	"encoding/binary"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Runner hints. Even nudged (nudge.go), a follower applies a committed
// input only after two log writes and a round trip. So when the leader
// applies an input that starts the next turn of a session placed on
// another node (fsm.NextTurnInput), it also tells that node directly, in
// one gossip datagram: session, epoch, the input's seq. The node's runner
// may then start the turn from its replica one event behind
// (fsm.WithInput) instead of waiting for it. A hint is advice, never
// authority: it is acted on only when the replica is exactly one event
// behind it, every write it leads to is fenced by the FSM as any other,
// and a lost or forged one costs nothing but the wait it would have saved.

// RunnerHint says that the input at InputSeq, the newest event of the
// session's journal, committed and starts the session's next turn — or,
// with View, that the entry the leader just applied asks the node's runner
// for a move step, and what the session is after it.
type RunnerHint struct {
	SessionID       string
	Epoch, InputSeq uint64
	// View: the session as the leader applied it, one event (the step's
	// move.* event) ahead of a replica that has applied the entry before
	// it (nil: an input hint).
	View *fsmpb.Session
}

// hintMessage tags a gossip user message carrying an input hint;
// viewMessage one carrying a session view for a move step.
const (
	hintMessage byte = 1
	viewMessage byte = 2
)

// maxViewBytes bounds a view hint to what one gossip datagram carries
// (memberlist's UDP buffer is 1,400 bytes, less its own headers); a larger
// session gets a commit nudge instead.
const maxViewBytes = 1200

func encodeHint(h RunnerHint) []byte {
	b := []byte{hintMessage}
	b = binary.AppendUvarint(b, h.Epoch)
	b = binary.AppendUvarint(b, h.InputSeq)
	return append(b, h.SessionID...)
}

func encodeView(s *fsmpb.Session) ([]byte, bool) {
	b, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend([]byte{viewMessage}, s)
	return b, err == nil && len(b) <= maxViewBytes
}

func decodeHint(b []byte) (RunnerHint, bool) {
	if len(b) > 1 && b[0] == viewMessage && len(b) <= maxViewBytes {
		s := &fsmpb.Session{}
		if proto.Unmarshal(b[1:], s) != nil || s.SessionId == "" || len(s.SessionId) > fsm.MaxSessionIDBytes {
			return RunnerHint{}, false
		}
		return RunnerHint{SessionID: s.SessionId, Epoch: s.Epoch, View: s}, true
	}
	if len(b) < 1 || b[0] != hintMessage {
		return RunnerHint{}, false
	}
	b = b[1:]
	epoch, n := binary.Uvarint(b)
	if n <= 0 {
		return RunnerHint{}, false
	}
	b = b[n:]
	seq, n := binary.Uvarint(b)
	if n <= 0 || len(b[n:]) == 0 || len(b[n:]) > fsm.MaxSessionIDBytes {
		return RunnerHint{}, false
	}
	return RunnerHint{SessionID: string(b[n:]), Epoch: epoch, InputSeq: seq}, true
}

// SetRunnerHints installs the receiver of the hints this node is sent
// (nil: drop them). It must return quickly: it runs on gossip's goroutine.
func (c *Cluster) SetRunnerHints(fn func(RunnerHint)) {
	if fn == nil {
		c.gossip.hints.Store(nil)
		return
	}
	c.gossip.hints.Store(&fn)
}

// hintFollower sends the runner of node the hint of session s when its
// next turn waits on an input that just committed, and reports whether it
// did. That runner then needs no commit nudge: it starts the turn from
// the hint, and the replication of its turn.started carries the input's
// commit to its replica. (A hint lost on the way costs that runner the
// commit timeout, 5–10 ms.)
//
// The same holds for the two move steps a runner takes (fsm.RunnerMoveStep:
// the source's checkpoint, the destination's restore): the leader sends
// that node the session as it applied it, and its runner takes the step
// from that view when its replica is exactly one event behind.
func (c *Cluster) hintFollower(node, sessionID string) bool {
	s, err := c.fsm.Session(sessionID)
	if err != nil {
		return false
	}
	if fsm.RunnerMoveStep(s) == node {
		b, ok := encodeView(s)
		return ok && c.gossip.send(node, b)
	}
	seq, ok := fsm.NextTurnInput(s)
	if !ok {
		return false
	}
	return c.gossip.send(node, encodeHint(RunnerHint{SessionID: s.SessionId, Epoch: s.Epoch, InputSeq: seq}))
}

// send sends msg to the named member, best effort (one datagram), and
// reports whether it went out.
func (g *gossip) send(name string, msg []byte) bool {
	for _, n := range g.list.Members() {
		if n.Name != name {
			continue
		}
		if err := g.list.SendBestEffort(n, msg); err != nil {
			g.logger.Debug("sending a runner hint", "to", name, "error", err)
			return false
		}
		return true
	}
	return false
}

// receive hands a user message to its receiver.
func (g *gossip) receive(msg []byte) {
	h, ok := decodeHint(msg)
	if !ok {
		return
	}
	if fn := g.hints.Load(); fn != nil {
		(*fn)(h)
	}
}
