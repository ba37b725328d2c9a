package cluster

import "github.com/hashicorp/raft"

// awaitApply is f.Error() for a future from raft.Apply that gives up with
// raft.ErrRaftShutdown once raftDown is closed and f has no answer. With
// BatchApplyCh (setupRaft) Apply hands its future to a buffered channel, and
// a future still in that buffer when Raft's main loop stops is never
// answered: f.Error() would wait forever (hashicorp/raft#498), and with it
// the node's shutdown. Cluster.Shutdown closes raftDown once raft.Shutdown
// has returned; an answer Raft gave before then is still what this returns.
// The goroutine waiting on a future Raft never answers ends with the
// process; there is at most one per entry proposed during a shutdown.
func awaitApply(f raft.ApplyFuture, raftDown <-chan struct{}) error {
	answer := make(chan error, 1)
	go func() { answer <- f.Error() }()
	select {
	case err := <-answer:
		return err
	case <-raftDown:
		select {
		case err := <-answer:
			return err
		default:
			return raft.ErrRaftShutdown
		}
	}
}
