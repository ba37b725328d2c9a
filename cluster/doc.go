// Package cluster wires fak's Raft and gossip: the Raft node (TCP stream
// layer owned by this package, raft-boltdb/v2 log and stable store behind a
// log cache, file snapshots), memberlist gossip carrying node metadata,
// bootstrap-expect, the leader-only membership reconcile loop (joins, graceful
// leaves, dead-server cleanup), leader address resolution, the group-commit
// applier and read-index waits for linearizable reads.
//
// It imports fsm for command types and never decides a domain rule.
package cluster
