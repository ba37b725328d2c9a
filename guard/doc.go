// Package guard is `fak guard`: it runs a coding agent's harness (Claude
// Code, Codex, Gemini CLI or any other) as a child process bound to a launch
// session in the fak cluster, and turns the harness's SessionStart and
// SessionEnd hooks into LifecycleService calls (DESIGN.md §6).
//
// The guard binds a launch (BindLaunch: a new session, or --session), makes
// a private run directory (0700) holding a unix socket (0600, peer uid
// checked, a per-launch random token), injects the hooks into the provider's
// own configuration (adapters.go), and runs the child with stdio passed
// through, signals forwarded and its exit code returned. The hooks (`fak
// guard-sessionstart`, `fak guard-sessionend`, hook.go) talk only to the
// socket; the guard alone talks to the cluster.
//
// Hooks are fail-open: they must never wedge or fail the provider (any
// error is one bounded stderr line and exit 0). The guard never interprets
// a hook: the FSM decides what a SessionStart source means (DESIGN.md §5);
// the guard only normalizes the payload and forwards it with a request id
// derived from the hook, so a redelivery is idempotent. It imports only the
// API client side and fsm's limits. The guarded agent's model calls are not
// metered yet (the gateway is issue 15).
package guard
