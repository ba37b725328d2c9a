package node_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// An attached watcher disconnected at address k reconnects to another node
// while writes continue and the leader is killed, and receives exactly
// k+1 … head: no gap, no duplicate.
func TestCluster_WatchResumesOnAnotherNodeAcrossLeaderLoss(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	leader := c.Leader()
	fs := c.Followers()
	first, second := fs[0], fs[1]
	id := createSession(t, c, first, "replay")
	att := attach(t, c, first, id, "browser", "watcher")

	// A writer appends notes through the first follower until told to stop;
	// it rides out the election (the API holds writes until a new leader).
	stop := make(chan struct{})
	done := make(chan struct{})
	var acked atomic.Int64
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			if _, err := appendText(ctx, c, first, id, text(i)); err == nil {
				acked.Add(1)
			}
			cancel()
		}
	}()
	var once sync.Once
	stopWriter := func() { once.Do(func() { close(stop); <-done }) }
	defer stopWriter()

	w := watch(t, c, first, id, att, 0)
	evs := w.waitFor(t, "20 events", func(evs []*fakv1.Event) bool { return len(evs) >= 20 })
	w.close()
	evs, _ = w.snapshot()
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("first stream: position %d holds seq %d", i, ev.Seq)
		}
	}
	k := evs[len(evs)-1].Seq

	c.Stop(leader)
	base := acked.Load()
	c.WaitFor(30*time.Second, "20 writes after the leader was killed", func() bool { return acked.Load() >= base+20 })
	stopWriter()

	head := describe(t, c, second, id).HeadSeq
	w2 := watch(t, c, second, id, att, k)
	rest := w2.waitFor(t, "the head", func(evs []*fakv1.Event) bool { return len(evs) > 0 && evs[len(evs)-1].Seq >= head })
	if uint64(len(rest)) != head-k {
		t.Fatalf("resumed after %d: %d events up to %d, want %d (%d..%d)", k, len(rest), rest[len(rest)-1].Seq, head-k, k+1, head)
	}
	journal := readAll(t, c, second, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)
	for i, ev := range rest {
		want := journal[k+uint64(i)]
		if ev.Seq != k+uint64(i)+1 || ev.Seq != want.Seq || ev.Text != want.Text {
			t.Fatalf("resumed stream position %d: seq %d %q, journal has %d %q", i, ev.Seq, ev.Text, want.Seq, want.Text)
		}
	}
}
