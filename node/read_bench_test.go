package node_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// BenchmarkDescribeStale is the API's own round trip: a stale read served
// from the local replica, no Raft involved, one client.
func BenchmarkDescribeStale(b *testing.B) {
	c := testcluster.New(b, testcluster.Options{})
	cl := c.Sessions(c.Leader())
	r, err := cl.CreateSession(context.Background(), connect.NewRequest(&fakv1.CreateSessionRequest{Title: "bench"}))
	if err != nil {
		b.Fatal(err)
	}
	req := &fakv1.DescribeSessionRequest{SessionId: r.Msg.Session.SessionId, Consistency: fakv1.ReadConsistency_READ_CONSISTENCY_STALE}
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := cl.DescribeSession(context.Background(), connect.NewRequest(req)); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	reportLatency(b, lat, elapsed, 1)
}
