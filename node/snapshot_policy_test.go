package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// With amortised snapshots a node does not snapshot after a few small
// entries, however many the entry threshold allows, but does once the log
// since its last snapshot is as large as the state that snapshot copied.
func TestSnapshotsAreAmortisedToTheLogWritten(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1, Configure: func(_ string, cfg *node.Config) {
		cfg.SnapshotThreshold, cfg.SnapshotInterval, cfg.SnapshotLogFraction = 4, 50*time.Millisecond, 1
	}})
	n := c.WaitForLeader(30 * time.Second)
	snapshots := func() float64 {
		_, mfs := scrape(t, c, n, testcluster.Token)
		v, _ := value(mfs, "fak_fsm_snapshots_total", map[string]string{"outcome": "ok"})
		return v
	}
	id := createSession(t, c, n, "amortised")
	for i := 0; i < 20; i++ {
		if _, err := appendText(ctxT(t, 10*time.Second), c, n, id, "small"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // six policy checks
	if got := snapshots(); got != 0 {
		t.Fatalf("%v snapshots after 20 small entries; want none until the log is as large as the state", got)
	}
	state, err := n.Running().FSM().StateBytes()
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("x", 1000)
	evs := make([]*fakv1.EventInput, 100)
	for i := range evs {
		evs[i] = &fakv1.EventInput{Kind: "note", Text: text}
	}
	for written := int64(0); written <= state; written += 100 * 1000 {
		if _, err := c.Sessions(n).AppendEvents(context.Background(), connect.NewRequest(&fakv1.AppendEventsRequest{SessionId: id, Events: evs})); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitFor(10*time.Second, "a snapshot once the log outgrew the state", func() bool { return snapshots() >= 1 })
}
