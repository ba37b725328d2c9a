package node_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/testcluster"
)

// BenchmarkClusterApply is the leader's propose path without the API:
// Cluster.Apply of one append command (one 256-byte event) from one client
// and from 64, spread over 100 sessions as BenchmarkAppend does. It is
// fak's core (group commit, Raft, the FSM's transaction) beside
// BenchmarkAppend, which adds the Connect API in front of it, and beside
// raw Raft (BenchmarkRawRaftApply), which has neither FSM nor API.
func BenchmarkClusterApply(b *testing.B) {
	for _, clients := range []int{1, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			benchClusterApply(b, clients)
		})
	}
}

func benchClusterApply(b *testing.B, clients int) {
	c := testcluster.New(b, testcluster.Options{})
	leader := c.Leader().Running().Cluster()
	const sessions = 100
	for s := 0; s < sessions; s++ {
		res, err := leader.Apply(context.Background(), &fsmpb.Command{
			RequestId: fmt.Sprint("create-", s),
			Body:      &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: fmt.Sprint("s", s)}},
		})
		if err != nil || res.Error != nil {
			b.Fatal(err, res)
		}
	}
	text := strings.Repeat("x", 256)
	driveClients(b, clients, 1, func(i int64) error {
		res, err := leader.Apply(context.Background(), &fsmpb.Command{
			RequestId: fmt.Sprint("r", i),
			Body: &fsmpb.Command_AppendEvents{AppendEvents: &fsmpb.AppendEvents{
				SessionId: fmt.Sprint("s", i%sessions), Events: []*fsmpb.EventInput{{Kind: "note", Text: text}},
			}},
		})
		if err == nil && res.Error != nil {
			err = fmt.Errorf("append refused: %s", res.Error.GetMessage())
		}
		return err
	})
}
