// Package checker judges a chaos history (see package history) against the
// journal semantics of fak.
//
// The checks are independent; the first three judge the history of
// appends, reads and watches:
//
//   - [Linearizable] asks porcupine whether every session's operations can be
//     ordered into one sequential execution, consistent with real time, that a
//     single append-only journal would produce. Sessions are independent, so
//     the model is partitioned per session and each session is checked on its
//     own. A session's state is its journal, held as an immutable cons list.
//
//   - [Durable] compares the history with the journals read back after the
//     final heal and full restart. It flags acknowledged appends that were lost
//     or moved, values applied twice, values nobody appended, appends that
//     certainly failed but took effect anyway, and data that a read once
//     returned but the final journal no longer holds.
//
//   - [Addresses] holds every address a client was shown — an acknowledged
//     append, every event of a read or a watch delivery (by digest), a head
//     reported by a compare mismatch — to the final journals: an address is
//     a resume cursor, so it must never name another event.
//
// [Leases], [Boundaries] and [Epochs] read the final journals of the lease
// sessions, the guarded launches' lineages and the moved sessions: at most
// one lease holder at every address and input only from it; exactly one
// child per acknowledged clear; gap-free addresses, strictly increasing
// epochs, no turn run by a retired epoch or twice, every cutover after its
// restore.
//
// # Events the fleet writes itself
//
// A workload session's journal holds more than the workload's values: a
// recovery move of the session writes move.requested, move.checkpointed,
// move.admitted, move.restored, epoch.changed and move.cutover, each at its
// own address, between two appends. Every check therefore works by address
// (Journal holds each event at its seq), never by counting values: the i-th
// value is not seq i. The model takes the seqs of those events from the
// final journal (Options.Others) and lets them appear at any time in
// address order; a head a client observed absorbs those up to it, and a
// value lands only after every one of them in its way. (Counting values was
// the bug behind the "moved writes" of the docker run of seed 1231730015.)
//
// # The journal model
//
// Journals start empty and number their events 1, 2, 3, ... An unconditional
// append always succeeds and gets seq len+1 (after any fleet events due). A CAS append with ExpectedSeq e
// succeeds only if len == e (its seq is then e+1). Otherwise it fails with
// Mismatch set and HeadSeq = len, an observation the model must also explain.
// A read returns every value in seq order.
//
// Outcomes map onto the model as follows:
//
//   - OK append: it took effect at exactly Seq. A CAS append also needs
//     len == ExpectedSeq at that point.
//   - Fail append with Mismatch: the compare saw len == HeadSeq != ExpectedSeq
//     and the journal is unchanged.
//   - Fail append without Mismatch: certainly no effect and nothing observed,
//     so it is dropped from the linearizability check. Durable still checks
//     that its value is absent.
//   - Info append: the outcome is unknown. Its return time is treated as
//     infinite, so porcupine may apply it anywhere after its call, or never
//     (placing it last is the same as never). A CAS append only applies if its
//     condition holds at that point.
//   - OK read: the journal equals Values at some point in its interval;
//     recorded with addresses, the values sit at Seqs and the head is
//     HeadSeq.
//   - Info and Fail reads observed nothing and are dropped.
//
// The journal only grows, so the OK reads also narrow when an Info append
// can have taken effect. It happened before the earliest return of a read
// that returned its value. It happened after the latest call of a read that
// did not, or else it never happened and can be placed last. Linearizable
// checks Info appends over this narrowed window. Exactly the same
// linearizations exist, so the verdict is the same. Without it, porcupine
// keeps every unseen Info append pending to the end of the history and tries
// it at each step of its search, which made the checks many times slower.
package checker
