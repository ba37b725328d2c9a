// Package node composes one fak node process: the FSM, its cluster
// membership (Raft + gossip) and the API server, with their lifecycle
// (start, retry-join, graceful leave, shutdown); the runner hosting the
// execution epochs placed on this node (node/runner, writing through the
// node's own API); and, on the leader, the reaper that turns lapsed leases
// and attachments into journaled commands and the move controller
// (mover.go) that drives moves, recovers the sessions of dead nodes and
// drains nodes, with the node records it commits from gossip
// (noderecord.go). Domain rules stay in fsm, admission in placement.
package node
