//go:build race

package e2e

// raceEnabled is true when the test binary is built with -race; the fak and
// fakctl binaries under test are then built with -race too, so data races
// inside the agents surface in their logs (and fail the test).
const raceEnabled = true
