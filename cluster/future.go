package cluster

import "github.com/hashicorp/raft"

// awaitFuture is f.Error() that gives up with raft.ErrRaftShutdown once
// raftDown is closed and f has no answer. Raft hands some requests to its
// main loop through buffered channels (Apply's with BatchApplyCh, as
// setupRaft sets it, and leadership transfers): a future still in such a
// buffer when the loop stops is never answered, so f.Error() would wait
// forever (hashicorp/raft#498), and with it the node's shutdown.
// Cluster.Shutdown closes raftDown once raft.Shutdown has returned; an
// answer Raft gave before then is still what this returns. The goroutine
// waiting on a future Raft never answers ends with the process; there is at
// most one per request made during a shutdown.
func awaitFuture(f raft.Future, raftDown <-chan struct{}) error {
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
