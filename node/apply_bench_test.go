package node_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/testcluster"
)

// BenchmarkClusterApply measures the leader's propose path without the API:
// Cluster.Apply of one append command (one 256-byte event), one client.
func BenchmarkClusterApply(b *testing.B) {
	c := testcluster.New(b, testcluster.Options{})
	leader := c.Leader().Running().Cluster()
	res, err := leader.Apply(context.Background(), &fsmpb.Command{
		RequestId: "create",
		Body:      &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s1"}},
	})
	if err != nil || res.Error != nil {
		b.Fatal(err, res)
	}
	text := strings.Repeat("x", 256)
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := leader.Apply(context.Background(), &fsmpb.Command{
			RequestId: fmt.Sprint("r", i),
			Body: &fsmpb.Command_AppendEvents{AppendEvents: &fsmpb.AppendEvents{
				SessionId: "s1", Events: []*fsmpb.EventInput{{Kind: "note", Text: text}},
			}},
		})
		if err != nil || res.Error != nil {
			b.Fatal(err, res)
		}
		lat[i] = time.Since(t0)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	reportLatency(b, lat, elapsed, 1)
}
