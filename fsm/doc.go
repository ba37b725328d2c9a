// Package fsm is fak's replicated state machine: the 32 command types and
// their Raft-entry encoding (codec.go), ApplyBatch over a bbolt database
// (fsm.go, store.go), the reads every other package serves from (read*.go),
// Snapshot/Restore, and the content digests and rebuilds behind the
// replay-equivalence check (digest.go, rebuild.go).
//
// It owns every domain rule (DESIGN.md §4, §5, §7, §8): sessions and their
// journals (typed event kinds, one writer each, compare-and-append),
// request-id deduplication, execution epochs and the epoch fence, client
// attachments, the input lease, input, interrupts and approvals, runner
// writes in turn order, budget envelopes, the reset ledger, guarded
// launches, their external runtime and provider hooks, node records and
// draining (and the runtimes a placement may name), the move state
// machine, stranded sessions, ACL tokens, the capability set by role, and
// the typed errors they produce.
//
// It must never read a clock, draw a random number, do network I/O or let
// map iteration order decide anything inside Apply: time and ids arrive
// inside commands, stamped by the leader, so every replica reaches the same
// state at the same log position however Raft batches the entries. A bad
// command is answered with a typed error and changes nothing; a failed
// write of the local database stops the FSM applying (storefail.go). It must never import anything of this
// module but its own generated types (fsm/fsmpb).
package fsm
