package chaos

import "time"

// Fleet is a running three-node fak fleet the harness can hurt.
type Fleet interface {
	// Nodes are the node names, n1..nN.
	Nodes() []string
	// APIAddr is the address the harness's clients use for node (host:port);
	// client traffic is never faulted by the network nemeses.
	APIAddr(node string) string
	// Kill crashes node (SIGKILL); Start starts it again from its data.
	Kill(node string) error
	Start(node string) error
	// Pause freezes node (SIGSTOP); Resume thaws it.
	Pause(node string) error
	Resume(node string) error
	// Net is the fleet's fault-injecting network.
	Net() Network
	// Describe is one line about the fleet for the report.
	Describe() string
	// Logs lists the files holding each node's log, for artifacts.
	Logs() []string
	// Close stops every node and releases the network.
	Close() error
}

// Network injects faults between nodes (never between the harness and a
// node).
type Network interface {
	// Partition splits the nodes into groups that cannot reach each other.
	Partition(groups ...[]string) error
	// Block stops traffic from one node to another (one way).
	Block(from, to string) error
	// SetLatency adds a one-way delay between two nodes.
	SetLatency(from, to string, d time.Duration) error
	// Heal removes every network fault.
	Heal() error
	// Supports says whether a nemesis kind can run on this network.
	Supports(kind NemesisKind) bool
}
