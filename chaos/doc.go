// Package chaos is fak's fault-injection harness, in the manner of Jepsen
// and etcd's robustness tests but part of this repository and of CI
// (README.md beside this file; docs/verification.md for the runs).
//
// A run starts a real three-node fleet (three `fak agent` processes on
// loopback behind a fault-injecting proxy, chaos/netproxy, or three
// containers on a private Docker network), drives it with clients that
// append to, read and watch many session journals through every node —
// plus lease clients, model sessions answered by fak's model loop against
// a fake OpenAI-compatible server in the harness, guarded launches that
// clear again and again, and moves — and meanwhile injects faults from a seeded plan: SIGKILL and
// restart, SIGSTOP/SIGCONT, partitions (majority / minority, leader
// isolation, one-way), added latency, and a crash of all nodes at once.
// Every operation is recorded (chaos/history); at the end the network is
// healed, the whole fleet restarted, and the checkers (chaos/checker)
// decide whether the history is linearizable per session, every
// acknowledged append survived at its address, every address a client saw
// still names the same event, leases, boundaries and epochs held, every
// input was answered exactly once by one epoch, the replicas agree, and every node's state equals its rebuild from snapshot
// and log. The same seed replays the same fault plan.
//
// It talks to the fleet only through the public API (api/apiclient) and
// the processes or containers it runs; it must never reach into a node's
// state, so a verdict is what a client could observe.
package chaos
