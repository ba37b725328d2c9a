// Package api serves fak's Connect RPC services (package fak.v1, defined in
// api/proto and generated into api/gen): thin handlers that validate
// requests, turn writes into fsm commands proposed on the leader
// (forwarding the same RPC to the leader when this node follows), and serve
// reads from the local replica after a read-index wait. It also owns
// bearer-token authentication and the role each procedure needs (roles.go:
// a procedure missing there is refused), TLS on the API port, request ids,
// the Prometheus /metrics page, the mapping of domain errors to Connect
// codes, health and reflection endpoints, and the operator's services
// (snapshots, Raft peers, replay checks, ACL tokens). The snapshot file
// format is the cluster's (cluster/snapshotfile); api shows its header as
// fak.v1.SnapshotMeta (snapshotmeta.go) and lets clients verify a file
// offline (VerifySnapshotFile). Subpackages: apiclient (the client side
// every caller shares), web (the browser page at /ui/).
//
// Handlers never decide a domain rule; the fsm package does (the capability
// set is fsm.Capabilities; descriptor.go only converts it). Nothing here keeps domain state of its own: a
// node can restart, or the leader change, between any two calls. The design:
// DESIGN.md beside this file; the reference: docs/api.md.
package api
