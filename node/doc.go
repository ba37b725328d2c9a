// Package node composes one fak node process: the FSM, its cluster
// membership (Raft + gossip) and the API server, with their lifecycle
// (start, retry-join, graceful leave, shutdown) and the node's metrics
// registry; the runner hosting the execution epochs placed on this node
// (node/runner, writing through the node's own API; node/runner/echo is
// the one built-in runtime adapter); and, on the leader, the controllers:
// the reaper that turns lapsed leases and attachments into journaled
// commands (reaper.go), the node records it commits from gossip
// (noderecord.go), and the move controller (mover.go) that drives every
// open move, recovers the sessions of dead nodes, marks recover=manual
// sessions stranded and drains nodes (DESIGN.md §8). node/testcluster runs
// real fleets of these nodes inside tests.
//
// It must never decide a domain rule (fsm does: a controller proposes a
// command and the FSM accepts or refuses it) nor an admission (placement
// does), and its controllers keep no state the FSM or gossip does not
// have, so a new leader continues where the last one stopped. Trade-offs:
// DESIGN.md beside this file.
package node
