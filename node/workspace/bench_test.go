package workspace_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fak-dev/fak/node/workspace"
)

// BenchmarkSnapshotAndMaterialize100MB moves a workspace of 1,000 files of
// 100 KB (10 directories of 100) and reports the throughput of each step
// of a move: Snapshot into an empty store (hash and write every chunk),
// Snapshot again with everything stored (hash only: the second checkpoint
// of an unchanged tree), and Materialize (read, verify, write and fsync).
func BenchmarkSnapshotAndMaterialize100MB(b *testing.B) {
	const files, size = 1000, 100 << 10
	src := filepath.Join(b.TempDir(), "src")
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	buf := make([]byte, size)
	for i := range files {
		d := filepath.Join(src, fmt.Sprintf("dir%02d", i/100))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range buf {
			buf[j] = byte(rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("file%03d.bin", i%100)), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	const mb = float64(files*size) / 1e6
	var cold, warm, mat time.Duration
	dst := filepath.Join(b.TempDir(), "ws")
	b.ResetTimer()
	for i := range b.N {
		s, err := workspace.OpenStore(filepath.Join(b.TempDir(), fmt.Sprintf("store%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		m, err := workspace.Snapshot(src, s, 0)
		if err != nil {
			b.Fatal(err)
		}
		cold += time.Since(start)

		start = time.Now()
		m2, err := workspace.Snapshot(src, s, 0)
		if err != nil || m2.Digest() != m.Digest() {
			b.Fatal(err)
		}
		warm += time.Since(start)

		start = time.Now()
		if err := workspace.Materialize(dst, m, s, 0); err != nil {
			b.Fatal(err)
		}
		mat += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(mb*n/cold.Seconds(), "snapshot-cold-MB/s")
	b.ReportMetric(mb*n/warm.Seconds(), "snapshot-warm-MB/s")
	b.ReportMetric(mb*n/mat.Seconds(), "materialize-MB/s")
}
