// Package cluster wires fak's Raft and gossip: the Raft node (TCP stream
// layer owned by this package, raft-boltdb/v2 log and stable store behind a
// log cache, file snapshots), memberlist gossip carrying node metadata,
// bootstrap-expect, the leader-only membership reconcile loop (joins, graceful
// leaves, dead-server cleanup), leader address resolution, the group-commit
// applier and read-index waits for linearizable reads. It also takes and
// installs backups of the replicated state (SaveSnapshot, RestoreSnapshot)
// in the snapshot file format that cluster/snapshotfile owns, header type
// included.
//
// It imports fsm for command types and nothing else of fak (never api, node
// or cmd; internal/layers checks it), and never decides a domain rule.
package cluster
