// Package api serves fak's Connect RPC services (package fak.v1): thin
// handlers that validate requests, turn writes into fsm commands proposed on
// the leader (forwarding the same RPC to the leader when this node follows),
// and serve reads from the local replica after a read-index wait. It also
// owns bearer-token authentication, the mapping of domain errors to Connect
// codes, health and reflection endpoints.
//
// Handlers never decide a domain rule; the fsm package does.
package api
