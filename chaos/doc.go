// Package chaos is fak's fault-injection harness, in the manner of Jepsen
// and etcd's robustness tests but part of this repository and of CI.
//
// A run starts a real three-node fleet (three `fak agent` processes on
// loopback behind a fault-injecting proxy, or three containers on a private
// Docker network), drives it with clients that append to and read many
// session journals through every node, and meanwhile injects faults from a
// seeded plan: SIGKILL and restart, SIGSTOP/SIGCONT, partitions (majority /
// minority, leader isolation, one-way), added latency, and a crash of all
// nodes at once. Every operation is recorded (chaos/history); at the end the
// network is healed, the whole fleet restarted, and the checkers
// (chaos/checker) decide whether the history is linearizable per session and
// whether every acknowledged append survived in place. The same seed replays
// the same fault plan.
package chaos
