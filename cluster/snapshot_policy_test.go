package cluster

import "testing"

// A snapshot is due once the log since the last holds both the entries
// and the bytes the policy asks for, whichever comes last.
func TestSnapshotDue(t *testing.T) {
	for _, tc := range []struct {
		entries, threshold, logBytes uint64
		state                        int64
		fraction                     float64
		want                         bool
	}{
		{entries: 100, threshold: 100, logBytes: 1 << 20, state: 1 << 20, fraction: 1, want: true},
		{entries: 99, threshold: 100, logBytes: 1 << 30, state: 1 << 20, fraction: 1, want: false},        // too few entries
		{entries: 1 << 20, threshold: 100, logBytes: 1<<20 - 1, state: 1 << 20, fraction: 1, want: false}, // too few bytes
		{entries: 1 << 20, threshold: 100, logBytes: 1 << 19, state: 1 << 20, fraction: 0.5, want: true},
	} {
		if got := snapshotDue(tc.entries, tc.threshold, tc.logBytes, tc.state, tc.fraction); got != tc.want {
			t.Errorf("%+v: due %v, want %v", tc, got, tc.want)
		}
	}
}

func TestTrailingLogs(t *testing.T) {
	for _, tc := range []struct {
		entries, bytes, configured, want uint64
	}{
		{0, 0, 10240, 10240},               // nothing to go by
		{1000, 1000 * 300, 10240, 10240},   // 300-byte entries: 64 MiB is more than configured
		{1000, 1000 * 290_000, 10240, 231}, // 1,000-event entries: 64 MiB of them
		{1000, 1000 * 20_000, 10240, 3355}, // 20 KB entries: 64 MiB of them
		{1000, 1000 * 20_000, 2000, 2000},  // never more than configured
		{10, 10 * (1 << 30), 10240, 64},    // huge entries: the floor
	} {
		if got := trailingLogs(tc.entries, tc.bytes, tc.configured); got != tc.want {
			t.Errorf("trailingLogs(%d, %d, %d) = %d, want %d", tc.entries, tc.bytes, tc.configured, got, tc.want)
		}
	}
}
