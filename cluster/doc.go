// Package cluster wires fak's Raft and gossip (DESIGN.md §9): the Raft node
// (a TCP stream layer this package owns, in mutual TLS when the node has a
// TLS identity; raft-boltdb/v2 log and stable store behind a log cache;
// file snapshots), memberlist gossip carrying node metadata and
// capabilities (encrypted with the fleet's keys), bootstrap-expect, the
// leader-only membership reconcile loop (joins, graceful leaves,
// dead-server cleanup), leader address resolution, the group-commit
// applier, read-index waits for linearizable reads, snapshot save and
// restore for backups (in the file format cluster/snapshotfile owns, header
// type included), and the replay-equivalence check (VerifyReplay).
// Subpackage devca is the development CA of `fak tls init`.
//
// It proposes and applies fsm commands but never decides a domain rule,
// never serves the API, and imports fsm and nothing else of fak (never api,
// node or cmd; internal/layers checks it). Trade-offs: DESIGN.md beside
// this file.
package cluster
