package main

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/hashicorp/go-hclog"
)

// defaultMemoryTarget is what a node's Go memory (heap, stacks, runtime)
// is kept near while its live heap is small. A node's state lives in
// bbolt, mapped from its file rather than held in anonymous memory, so
// the heap is mostly what requests allocate; with the collector tuned for
// CPU (defaultGCPercent) the heap would grow to five times what is live
// (150–190 MB per node after a 64-client load) without a limit.
const defaultMemoryTarget = 56 << 20

// memoryGovernInterval is how often the limit follows the live heap.
const memoryGovernInterval = 2 * time.Second

// governMemory sets the runtime's soft memory limit to target and, until
// ctx ends, raises it to 1.5× the live heap whenever that is more: a
// fixed limit under a live heap that nears it makes the collector run
// back to back, while at 1.5× it costs at most what GOGC=50 would. A
// GOMEMLIMIT in the environment wins (governMemory is not called).
func governMemory(ctx context.Context, target int64, logger hclog.Logger) {
	debug.SetMemoryLimit(target)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	limit := target
	t := time.NewTicker(memoryGovernInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			continue
		}
		live := sample[0].Value.Uint64()
		want := memoryLimitFor(target, live)
		if want != limit {
			if (want > target) != (limit > target) {
				logger.Info("memory limit follows the live heap", "limit", formatBytes(want), "live_heap", formatBytes(int64(live)), "target", formatBytes(target))
			}
			debug.SetMemoryLimit(want)
			limit = want
		}
	}
}

// memoryLimitFor is the limit for a live heap: the target, or 1.5× the
// live heap when that is more.
func memoryLimitFor(target int64, live uint64) int64 {
	l := min(live, math.MaxInt64/2) // no overflow below
	return max(target, int64(l+l/2))
}

// startMemoryGovernor applies the agent's memory target unless GOMEMLIMIT
// is set or the target is 0 (off), and returns what it did for the log.
func startMemoryGovernor(ctx context.Context, target int64, logger hclog.Logger) string {
	switch {
	case os.Getenv("GOMEMLIMIT") != "":
		return "GOMEMLIMIT=" + os.Getenv("GOMEMLIMIT")
	case target <= 0:
		return "off"
	}
	go governMemory(ctx, target, logger)
	return formatBytes(target)
}
