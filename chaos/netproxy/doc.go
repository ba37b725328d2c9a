// Package netproxy is the network fault layer of the chaos harness: TCP and
// UDP proxies placed between the nodes of a fleet of local processes, plus a
// fault table (blocks, partitions, latency) that every proxy consults on every
// chunk or packet.
//
// # Topology
//
// Each node gets its own loopback IP (127.0.0.11, 127.0.0.12, ...; Linux
// routes all of 127/8 to lo). A node binds its real listeners on its IP and
// advertises proxy addresses instead, so its peers reach it only through the
// proxies, and every connection or packet a node sends originates from its
// own IP. A proxy is created on behalf of the destination node
// ([Network.ProxyTCP], [Network.ProxyUDP]) and forwards to that node's real
// listener.
//
// # Why identify the sender by source IP
//
// One proxy per destination (rather than one per ordered pair of nodes) is
// enough, and nodes need no special configuration to dial "the n1->n2
// proxy": the proxy learns which link a connection or packet travels from the
// source IP the kernel reports, which the node cannot get wrong. The proxy
// then dials the target from that same IP, so the destination also sees the
// true source (Raft and memberlist log and compare peer addresses). Sources
// whose IP belongs to no registered node, such as test clients on 127.0.0.1,
// are never faulted.
//
// # Why TCP stalls instead of dropping
//
// Under a real partition TCP does not lose bytes in the middle of a stream:
// the sender retransmits until the path heals or the application gives up
// and closes the connection. Dropping chunks from a byte stream would instead
// corrupt it, which no real network does to TCP. So a blocked TCP direction
// stops forwarding (the proxy stops reading, the kernel windows fill, the
// writer eventually blocks) and resumes with the stream intact on heal; it is
// up to the nodes' own timeouts to close connections, exactly as they must in
// production. A connection accepted while its source-to-destination link is
// blocked is held open but not dialed through until the link opens (as a SYN
// would not get through). UDP is datagrams, so a blocked UDP link drops.
//
// Latency is one-way: each TCP chunk or UDP packet is delivered no earlier
// than the time it was read plus the link's current delay, in order for TCP,
// without serialising throughput to one chunk per delay.
//
// # Connection close
//
// End of stream (or a read error) from one side travels in-band, behind the
// data read before it and subject to the same faults; once it is delivered
// the proxy closes both sides. Half-closes are therefore not propagated, and
// data still queued in the other direction at that moment is discarded.
package netproxy
