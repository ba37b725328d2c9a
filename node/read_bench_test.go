package node_test

import (
	"context"
	"fmt"
	"testing"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// BenchmarkDescribeStale is the API's own round trip: a stale read served
// from the local replica, no Raft involved, by one client and by 64 — the
// ceiling of fak's Connect stack on this machine, beside which the
// 64-client append rate is read.
func BenchmarkDescribeStale(b *testing.B) {
	for _, clients := range []int{1, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			c := testcluster.New(b, testcluster.Options{})
			cl := c.Sessions(c.Leader())
			r, err := cl.CreateSession(context.Background(), connect.NewRequest(&fakv1.CreateSessionRequest{Title: "bench"}))
			if err != nil {
				b.Fatal(err)
			}
			req := &fakv1.DescribeSessionRequest{SessionId: r.Msg.Session.SessionId, Consistency: fakv1.ReadConsistency_READ_CONSISTENCY_STALE}
			driveClients(b, clients, 1, func(int64) error {
				_, err := cl.DescribeSession(context.Background(), connect.NewRequest(req))
				return err
			})
		})
	}
}
