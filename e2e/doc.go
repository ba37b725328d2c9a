// Package e2e holds process-level end-to-end tests: they build the real fak
// and fakctl binaries, run a fleet of `fak agent` processes on loopback and
// drive it only through fakctl subprocesses, as an operator would.
//
// The tests skip themselves under -short. They are otherwise part of
// `go test ./...`.
package e2e
