//go:build race

package node_test

// raceEnabled: the race detector's shadow memory inflates RSS several
// times over the heap, so memory bounds are checked on the heap then.
const raceEnabled = true
