package node_test

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// The fak binary runs with GOGC=400 unless GOGC is set (cmd/fak/main.go);
// benchmark the same way.
func init() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// benchAppend drives AppendEvents on the leader of a fresh three-node fleet
// from `clients` goroutines, `batch` events of 256 bytes per call, and
// reports events/s and latency percentiles.
func benchAppend(b *testing.B, clients, batch int) {
	c := testcluster.New(b, testcluster.Options{})
	leader := c.Leader()
	cl := c.Sessions(leader)
	var ids []string
	for i := 0; i < 100; i++ {
		r, err := cl.CreateSession(context.Background(), connect.NewRequest(&fakv1.CreateSessionRequest{Title: "bench"}))
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, r.Msg.Session.SessionId)
	}
	payload := strings.Repeat("x", 256)
	events := make([]*fakv1.EventInput, batch)
	for i := range events {
		events[i] = &fakv1.EventInput{Kind: "note", Text: payload}
	}
	driveClients(b, clients, batch, func(i int64) error {
		_, err := cl.AppendEvents(context.Background(), connect.NewRequest(&fakv1.AppendEventsRequest{
			SessionId: ids[i%int64(len(ids))], Events: events,
		}))
		return err
	})
}

// driveClients runs op b.N times from `clients` goroutines, each call
// timed, and reports the rate (perOp events a call) and latency
// percentiles.
func driveClients(b *testing.B, clients, perOp int, op func(i int64) error) {
	var next atomic.Int64
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t0 := time.Now()
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	reportLatency(b, lat, elapsed, perOp)
}

func reportLatency(b *testing.B, lat []time.Duration, elapsed time.Duration, perOp int) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(lat)*perOp)/elapsed.Seconds(), "events/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

func BenchmarkAppend(b *testing.B) {
	for _, tc := range []struct{ clients, batch int }{{1, 1}, {64, 1}, {64, 16}} {
		b.Run(fmt.Sprintf("clients=%d/batch=%d", tc.clients, tc.batch), func(b *testing.B) {
			benchAppend(b, tc.clients, tc.batch)
		})
	}
}
