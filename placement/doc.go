// Package placement decides where an execution epoch may run (DESIGN.md
// §8): destination admission as a pure function of the session, its budget
// envelope, a node record and the node's gossip status — every check named
// (alive, not_draining, capacity, adapter, provider, model, account_ref,
// budget, labels, degradation), a refusal naming every failed one — and the
// choice of the least loaded admitted node when the operator names none.
//
// It reads nothing and writes nothing: the move controller (node/mover.go)
// calls it with what it read from the FSM and gossip, so the same inputs
// always give the same decision. It must never read a clock, the FSM or
// the network, and imports nothing of this module but fsm/fsmpb.
package placement
