package main

import (
	"math"
	"slices"
	"time"
)

// latencyStats summarizes per-call latencies.
type latencyStats struct {
	P50, P90, P99, P999, Max time.Duration
}

// summarizeLatencies computes percentiles of latencies, which it sorts in
// place: the caller keeps one preallocated slice and needs no copy.
func summarizeLatencies(latencies []time.Duration) latencyStats {
	slices.Sort(latencies)
	var stats latencyStats
	if len(latencies) == 0 {
		return stats
	}
	stats.P50 = percentile(latencies, 50)
	stats.P90 = percentile(latencies, 90)
	stats.P99 = percentile(latencies, 99)
	stats.P999 = percentile(latencies, 99.9)
	stats.Max = latencies[len(latencies)-1]
	return stats
}

// percentile returns the nearest-rank p-th percentile of sorted: the
// smallest value that at least p percent of the values do not exceed.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// The epsilon absorbs floating-point error, e.g. 99.9% of 1000 computing
	// as 999.0000000000001 and rounding up to the next rank.
	rank := int(math.Ceil(p/100*float64(len(sorted)) - 1e-9))
	return sorted[min(max(rank-1, 0), len(sorted)-1)]
}
