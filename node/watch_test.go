package node_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// watchUntil streams events with seq > after from node n until it has seen
// seq `until`, and returns them.
func watchUntil(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id string, after, until uint64) []*fakv1.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := c.Sessions(n).WatchEvents(ctx, connect.NewRequest(&fakv1.WatchEventsRequest{SessionId: id, AfterSeq: after}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var out []*fakv1.Event
	for stream.Receive() {
		out = append(out, stream.Msg().Events...)
		if len(out) > 0 && out[len(out)-1].Seq >= until {
			return out
		}
	}
	t.Fatalf("watch on %s ended at %d events: %v", n.Name, len(out), stream.Err())
	return nil
}

func TestCluster_WatchReplaysThenFollowsLive(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	id := createSession(t, c, c.Leader(), "watch")
	for i := 0; i < 10; i++ {
		if _, err := appendText(ctxT(t, 5*time.Second), c, c.Leader(), id, text(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Live appends happen while two watchers on different nodes follow.
	go func() {
		for i := 10; i < 30; i++ {
			appendText(context.Background(), c, c.Nodes[i%3], id, text(i))
		}
	}()
	// session.created, epoch.changed and 30 notes.
	a := watchUntil(t, c, c.Nodes[0], id, 0, 32)
	b := watchUntil(t, c, c.Nodes[1], id, 0, 32)
	if len(a) != 32 || len(b) != 32 {
		t.Fatalf("watchers saw %d and %d events, want 32", len(a), len(b))
	}
	for i := range a {
		if a[i].Seq != uint64(i+1) || a[i].Seq != b[i].Seq || a[i].Text != b[i].Text {
			t.Fatalf("watchers disagree at %d: %d/%q vs %d/%q", i, a[i].Seq, a[i].Text, b[i].Seq, b[i].Text)
		}
	}
	// Reconnecting to another node with the last applied address yields
	// exactly the missing events: no gap, no duplicate.
	for i := 30; i < 35; i++ {
		if _, err := appendText(ctxT(t, 5*time.Second), c, c.Leader(), id, text(i)); err != nil {
			t.Fatal(err)
		}
	}
	rest := watchUntil(t, c, c.Nodes[2], id, 20, 37)
	if len(rest) != 17 || rest[0].Seq != 21 || rest[len(rest)-1].Seq != 37 {
		t.Fatalf("resume after 20 returned %d events (%d..%d), want 21..37", len(rest), rest[0].Seq, rest[len(rest)-1].Seq)
	}
}
