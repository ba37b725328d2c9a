//go:build race

package main

// guardRace: the test binary runs with the race detector, so the fak binary
// under test is built with it too.
const guardRace = true
