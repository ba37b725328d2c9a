//go:build !race

package main

// guardRace: the test binary runs without the race detector.
const guardRace = false
