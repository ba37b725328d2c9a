// Package node composes one fak node process: the FSM, its cluster
// membership (Raft + gossip) and the API server, with their lifecycle
// (start, retry-join, graceful leave, shutdown). Later issues add the
// controllers, the runner and the guard socket here.
package node
