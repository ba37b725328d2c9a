package node_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// BenchmarkSnapshotWriteLatency: does a snapshot make writes slow? A fleet
// holding FAK_SNAPLAT_EVENTS events (300,000 by default; 256-byte notes)
// takes writes from 16 clients (one event per call) while, every other
// phase of 2 s, all three nodes snapshot at once (as the amortised policy
// has them do: they reach its threshold together). A write that overlaps
// any node's snapshot counts as during; the target is p99 during
// ≤ 1.5× p99 outside. Automatic snapshots are off for the run; snapshots
// are paced as the agent paces them (FAK_SNAPLAT_RATE bytes/s overrides
// cluster.DefaultSnapshotRate; 0: unpaced).
func BenchmarkSnapshotWriteLatency(b *testing.B) {
	events := benchEnv(b, "FAK_SNAPLAT_EVENTS", 300_000, 1000)
	rate := benchEnv(b, "FAK_SNAPLAT_RATE", cluster.DefaultSnapshotRate, 0)
	c := benchFleet(b, testcluster.Options{Configure: func(_ string, cfg *node.Config) {
		cfg.SnapshotThreshold = 1 << 40 // only the benchmark's
		cfg.SnapshotLogFraction = 0
		cfg.SnapshotRate = rate
	}})
	leader := c.Leader()
	cl := c.Sessions(leader)
	var ids []string
	for i := 0; i < 16; i++ {
		r, err := cl.CreateSession(context.Background(), connect.NewRequest(&fakv1.CreateSessionRequest{
			Title: "snapshot latency", Placement: &fakv1.Placement{Node: "elsewhere"},
		}))
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, r.Msg.Session.SessionId)
	}
	appendThousands(b, cl, ids[0], int(events/1000))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		during, outside, snaps := snapshotLatencyRun(b, c, ids)
		slices.Sort(during)
		slices.Sort(outside)
		p99 := func(d []time.Duration) float64 {
			return float64(d[len(d)*99/100].Microseconds()) / 1000
		}
		b.ReportMetric(p99(outside), "p99-outside-ms")
		b.ReportMetric(p99(during), "p99-during-ms")
		b.ReportMetric(p99(during)/p99(outside), "during/outside")
		b.ReportMetric(float64(outside[len(outside)/2].Microseconds())/1000, "p50-outside-ms")
		b.ReportMetric(float64(during[len(during)/2].Microseconds())/1000, "p50-during-ms")
		b.ReportMetric(snaps.Seconds()*1000, "snapshot-ms")
	}
}

// snapshotLatencyRun runs the writers through three quiet and three
// snapshot phases and returns the write latencies during and outside
// snapshots, and the mean snapshot time.
func snapshotLatencyRun(b *testing.B, c *testcluster.Cluster, ids []string) (during, outside []time.Duration, snap time.Duration) {
	cl := c.Sessions(c.Leader())
	var snapping atomic.Int32  // nodes snapshotting now
	var snapEnded atomic.Int64 // unix nanos the last snapshot ended
	type write struct {
		took    time.Duration
		touched bool
	}
	var mu sync.Mutex
	var writes []write
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := []*fakv1.EventInput{{Kind: "note", Text: strings.Repeat("y", 256)}}
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				before := snapping.Load() > 0
				if _, err := cl.AppendEvents(context.Background(), connect.NewRequest(&fakv1.AppendEventsRequest{SessionId: ids[w], Events: ev})); err != nil {
					b.Error(err)
					return
				}
				took := time.Since(start)
				touched := before || snapping.Load() > 0 || snapEnded.Load() >= start.UnixNano()
				mu.Lock()
				writes = append(writes, write{took, touched})
				mu.Unlock()
			}
		}()
	}
	var snaps []time.Duration
	for phase := 0; phase < 6; phase++ {
		if phase%2 == 0 {
			time.Sleep(2 * time.Second)
			continue
		}
		var sw sync.WaitGroup
		for _, n := range c.Nodes {
			sw.Add(1)
			go func() {
				defer sw.Done()
				snapping.Add(1)
				start := time.Now()
				err := n.Running().Cluster().Raft().Snapshot().Error()
				took := time.Since(start)
				snapEnded.Store(time.Now().UnixNano())
				snapping.Add(-1)
				if err != nil {
					b.Errorf("snapshot on %s: %v", n.Name, err)
				}
				mu.Lock()
				snaps = append(snaps, took)
				mu.Unlock()
			}()
		}
		sw.Wait()
	}
	close(stop)
	wg.Wait()
	for _, w := range writes {
		if w.touched {
			during = append(during, w.took)
		} else {
			outside = append(outside, w.took)
		}
	}
	var sum time.Duration
	for _, s := range snaps {
		sum += s
	}
	if len(during) < 100 || len(outside) < 100 {
		b.Fatalf("%d writes during snapshots and %d outside: too few to compare", len(during), len(outside))
	}
	return during, outside, sum / time.Duration(len(snaps))
}
