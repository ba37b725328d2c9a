// Package runner hosts the execution epochs placed on one node: it watches
// the local replica, and for each session whose current epoch runs here it
// turns committed input into turns of the session's runtime adapter
// (turn.started, output, tools, approvals, turn.completed). A runtime sees
// the journal after the session's last reset boundary, and every turn is
// charged to the session's budget envelope in the write that starts it (a
// turn the envelope refuses is closed by the FSM in that write, never
// run); its usage rides on the write of its turn.completed.
//
// The runner finds work through the FSM's change feed (the sessions each
// applied batch wrote) and, for a session on a follower, a runner hint from
// the leader (cluster/hint.go): the input that starts the next turn, acted
// on from the replica one event behind. It decides on its own replica
// once that holds the runner's own writes; every write is fenced by the
// FSM, and after a fenced write the next decision follows a read barrier.
//
// The runner owns no state of its own: everything it decides is read from
// the journal and the session record, so a restarted runner (or the next
// epoch's runner on another node) continues where the last one stopped.
// Every write carries the epoch it was decided under; the FSM fences writes
// of any other epoch with STALE_EPOCH. The runner never decides a domain
// rule (which input a turn serves, whether a tool result may follow an
// approval): the FSM does, and the runner follows.
//
// Runtimes plug in behind the Adapter seam (adapter.go): echo (built in,
// node/runner/echo), exec (any program, node/runner/exec) and model (fak's
// own loop over an OpenAI-compatible endpoint, node/runner/model); the
// node builds them from its config's runtime blocks. A turn's context ends
// with the turn (interrupt, retired epoch, stop, shutdown: watchTurn), and
// processes run through node/runner/proc (process group, clean env,
// optional bwrap). Streamed text is coalesced by Output. The provider
// runtimes are issue 15. Trade-offs: DESIGN.md beside this file.
package runner
