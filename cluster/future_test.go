package cluster

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Appliers racing Raft's shutdown all return: a future left in Raft's
// buffered apply channel (BatchApplyCh) is never answered, and only
// raftDown ends the wait on it. A round ends when every applier has
// returned or fails after 10 s.
func TestAwaitFutureReturnsAcrossShutdown(t *testing.T) {
	const rounds, appliers = 10, 8
	for round := range rounds {
		n := newMemNode(t, fmt.Sprintf("n%d", round), nopFSM{}, func(c *raft.Config) { c.BatchApplyCh = true })
		newLeader(t, n)
		raftDown := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, appliers)
		for range appliers {
			wg.Go(func() {
				for {
					if err := awaitFuture(n.raft.Apply([]byte("x"), 0), raftDown); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		base := n.raft.AppliedIndex()
		waitFor(t, "appliers committing", func() bool { return n.raft.AppliedIndex() >= base+100 })
		if err := n.raft.Shutdown().Error(); err != nil {
			t.Fatalf("round %d: shutdown: %v", round, err)
		}
		close(raftDown)
		returned := make(chan struct{})
		go func() { wg.Wait(); close(returned) }()
		select {
		case <-returned:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: appliers still waiting 10 s after Raft shut down", round)
		}
		close(errs)
		for err := range errs {
			if !errors.Is(err, raft.ErrRaftShutdown) && !errors.Is(err, raft.ErrLeadershipLost) {
				t.Fatalf("round %d: applier ended with %v, want Raft's shutdown", round, err)
			}
		}
	}
}
