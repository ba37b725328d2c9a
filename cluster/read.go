package cluster

import (
	"context"
	"fmt"
)

// ReadIndex returns a commit index at which this leader has confirmed it
// still leads (the read-index protocol): capture the commit index first, then
// verify leadership with a quorum round, so no later leader can have
// committed anything this node does not know about. A read that waits until
// the index is applied is linearizable.
func (c *Cluster) ReadIndex(ctx context.Context) (uint64, error) {
	if !c.IsLeader() {
		return 0, ErrNotLeader
	}
	idx := c.raft.CommitIndex()
	errCh := make(chan error, 1)
	go func() { errCh <- c.raft.VerifyLeader().Error() }()
	select {
	case err := <-errCh:
		if err != nil {
			return 0, ErrNotLeader
		}
	case <-c.raftDown: // Raft may never answer a verify it took at shutdown (awaitFuture)
		return 0, ErrShutdown
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return idx, nil
}

// ReadIndexForPeer is ReadIndex for another node, which waits until its
// own replica, at applied, has applied the index: when the index is above
// it, the leader also appends an empty entry (a commit nudge, nudge.go),
// whose replication tells that node the index committed within a round
// trip instead of the commit timeout. (applied 0: a caller that does not
// say; no nudge.)
func (c *Cluster) ReadIndexForPeer(ctx context.Context, applied uint64) (uint64, error) {
	idx, err := c.ReadIndex(ctx)
	if err == nil && applied > 0 && idx > applied {
		c.requestNudge()
	}
	return idx, err
}

// WaitApplied blocks until the local FSM has applied index idx.
func (c *Cluster) WaitApplied(ctx context.Context, idx uint64) error {
	for {
		ch := c.fsm.Applied()
		if c.fsm.AppliedIndex() >= idx {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for index %d (applied %d): %w", idx, c.fsm.AppliedIndex(), ctx.Err())
		case <-c.shutdownCh:
			return ErrShutdown
		}
	}
}
