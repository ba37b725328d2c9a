// Package fsm is fak's replicated state machine: the command types and their
// Raft-entry encoding, Apply, the bbolt-backed state store, Snapshot/Restore
// and every domain rule (sessions, journals, idempotency, compare-and-append,
// typed errors).
//
// Apply must be deterministic: it never reads a clock, draws a random number,
// does network I/O or depends on map iteration order. Time and ids arrive
// inside commands, stamped by the leader. This package must never import
// cluster, node, placement or api.
package fsm
