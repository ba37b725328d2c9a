package main

import "testing"

// The limit stays at the target while the live heap is small and follows
// 1.5× the live heap above two thirds of it, so the collector never runs
// back to back under a limit the live heap has reached.
func TestMemoryLimitFor(t *testing.T) {
	const target = 56 << 20
	for live, want := range map[uint64]int64{
		0: target, 20 << 20: target, 37 << 20: target, 40 << 20: 60 << 20, 1 << 30: 3 << 29,
		1<<64 - 1: 3<<61 - 2,
	} {
		if got := memoryLimitFor(target, live); got != want {
			t.Errorf("memoryLimitFor(%d, %d) = %d, want %d", target, live, got, want)
		}
	}
}
