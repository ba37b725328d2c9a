// Package node composes one fak node process: the FSM, its cluster
// membership (Raft + gossip) and the API server, with their lifecycle
// (start, retry-join, graceful leave, shutdown); the runner hosting the
// execution epochs placed on this node (node/runner, writing through the
// node's own API); and, on the leader, the reaper that turns lapsed leases
// and attachments into journaled commands. Later issues add the move
// controller and the guard socket here. Domain rules stay in fsm.
package node
