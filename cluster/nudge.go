package cluster

import (
	"github.com/fak-dev/fak/fsm"
)

// Commit nudges. A follower learns that an entry committed only from the
// leader's next AppendEntries, which on a quiet fleet comes CommitTimeout
// later (Raft randomises it to 5–10 ms). When an entry the leader applied
// gives a follower's runner something to do — an input, an interrupt, a
// move's next step (fsm.SessionChange.NeedsRunner on a session placed on
// another node) — and no runner hint told that runner already (hint.go),
// the leader appends an empty fak entry at once: replicating it carries
// the new commit index, so that runner starts within a round trip
// instead. (Not raft.Barrier: the FSM never sees a
// barrier entry, so followers' applied index would stop short of the
// commit index handed out as a read index; see leaderLoop.) The runner's
// own writes (its output, its charges) nudge nothing. At most one entry is
// in flight; a request made meanwhile is served by one more after it, and
// under load, when entries flow anyway, the entry only joins their batch.

// nudgeLoop runs on the leader until stopCh closes: it follows the FSM's
// change feed and asks for an empty entry when a follower has work; the
// nudger appends them.
func (c *Cluster) nudgeLoop(stopCh <-chan struct{}) {
	if c.fsm == nil {
		return // a test rig of the leader loop alone
	}
	done := make(chan struct{})
	stopNudger := make(chan struct{})
	defer func() { close(stopNudger); <-done }()
	go c.nudger(stopNudger, done)
	f := c.fsm
	changed := f.Changed()
	cursor := f.ChangeCursor()
	for {
		select {
		case <-stopCh:
			return
		case <-c.shutdownCh:
			return
		case <-changed:
		}
		changed = f.Changed()
		changes, next, _ := f.ChangesSince(cursor)
		cursor = next
		for _, ch := range changes {
			if ch.NeedsRunner && ch.Node != "" && ch.Node != c.cfg.Name && !c.hintFollower(ch.Node, ch.SessionID) {
				c.requestNudge()
			}
		}
	}
}

// requestNudge asks the leader's nudger for an empty entry (one request
// waits at most; more are served by it).
func (c *Cluster) requestNudge() {
	select {
	case c.nudges <- struct{}{}:
	default: // one is already asked for, after the current one
	}
}

// nudger appends one empty entry per request until stop closes.
func (c *Cluster) nudger(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	empty, err := fsm.EncodeBatch(nil)
	if err != nil {
		panic(err)
	}
	for {
		select {
		case <-stop:
			return
		case <-c.nudges:
		}
		err := awaitFuture(c.raft.Apply(empty, raftTimeout), c.raftDown)
		c.cfg.observer().ObserveCommitNudge(err)
	}
}
