package node_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// Twenty attachments, attached through random nodes, race for the input
// lease of one session: exactly one wins; the others learn who holds it.
// When the holder stops renewing, the leader's reaper records the expiry
// and another attachment takes the lease without stealing; a steal is a
// lease.taken event naming the previous holder, seen by every watcher.
func TestCluster_LeaseExclusivityExpiryAndSteal(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{LeaseTTL: 3 * time.Second})
	id := createSession(t, c, c.Nodes[0], "lease")
	atts := make([]string, 20)
	via := make([]*testcluster.Node, 20)
	for i := range atts {
		via[i] = c.Nodes[rand.IntN(len(c.Nodes))]
		atts[i] = attach(t, c, via[i], id, "terminal", fmt.Sprint("t", i))
	}
	head := describe(t, c, c.Nodes[0], id).HeadSeq

	start := make(chan struct{})
	errs := make([]error, len(atts))
	var wg sync.WaitGroup
	for i := range atts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = takeLease(ctxT(t, 20*time.Second), c, via[i], id, atts[i], false)
		}()
	}
	close(start)
	wg.Wait()
	holder := -1
	for i, err := range errs {
		if err == nil {
			if holder >= 0 {
				t.Fatalf("attachments %d and %d both took the lease", holder, i)
			}
			holder = i
		}
	}
	if holder < 0 {
		t.Fatalf("nobody took the lease: %v", errs)
	}
	for i, err := range errs {
		if i == holder {
			continue
		}
		if connect.CodeOf(err) != connect.CodeFailedPrecondition || reasonOf(err) != "LEASE_HELD" || !strings.Contains(err.Error(), atts[holder]) {
			t.Fatalf("attachment %d: %v (reason %q), want LEASE_HELD naming %s", i, err, reasonOf(err), atts[holder])
		}
	}
	evs := after(readAll(t, c, c.Leader(), id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE), head)
	if len(evs) != 1 || evs[0].Kind != "lease.taken" || fact(t, evs[0])["attachment_id"] != atts[holder] {
		t.Fatalf("after the race the journal grew by %s, want one lease.taken by %s", transcript(evs), atts[holder])
	}

	// The holder never renews: the reaper releases the lease as expired.
	evs = waitJournal(t, c, c.Nodes[1], id, "the reaper's lease.released", func(evs []*fakv1.Event) bool {
		return count(after(evs, head), "lease.released") > 0
	})
	rel := after(evs, head)[1]
	if f := fact(t, rel); rel.Kind != "lease.released" || f["reason"] != "expired" || f["attachment_id"] != atts[holder] {
		t.Fatalf("next event = %s %q %s, want lease.released of %s, reason expired", rel.Kind, rel.Text, rel.Data, atts[holder])
	}
	next := (holder + 1) % len(atts)
	if err := takeLease(ctxT(t, 15*time.Second), c, via[next], id, atts[next], false); err != nil {
		t.Fatalf("taking the expired lease without steal: %v", err)
	}

	// The new holder keeps renewing until its lease is stolen.
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		for {
			_, err := c.Sessions(via[next]).RenewLease(ctxT(t, 10*time.Second), connect.NewRequest(&fakv1.RenewLeaseRequest{SessionId: id, AttachmentId: atts[next]}))
			if reasonOf(err) == "LEASE_NOT_HELD" {
				return
			}
			time.Sleep(300 * time.Millisecond) // the renew period, not a wait for a condition
		}
	}()
	h := describe(t, c, c.Nodes[0], id).HeadSeq
	thief := (holder + 2) % len(atts)
	var watchers []*watcher
	for _, i := range []int{(holder + 3) % len(atts), (holder + 4) % len(atts)} {
		watchers = append(watchers, watch(t, c, c.Nodes[i%len(c.Nodes)], id, atts[i], h))
	}
	if err := takeLease(ctxT(t, 15*time.Second), c, via[thief], id, atts[thief], false); reasonOf(err) != "LEASE_HELD" {
		t.Fatalf("taking a held lease without steal: %v, want LEASE_HELD", err)
	}
	if err := takeLease(ctxT(t, 15*time.Second), c, via[thief], id, atts[thief], true); err != nil {
		t.Fatalf("steal: %v", err)
	}
	<-renewDone
	for i, w := range watchers {
		evs := w.waitFor(t, "the steal", func(evs []*fakv1.Event) bool { return count(evs, "lease.taken") > 0 })
		f := fact(t, evs[0])
		if evs[0].Kind != "lease.taken" || f["attachment_id"] != atts[thief] || f["stolen_from"] != atts[next] {
			t.Fatalf("watcher %d saw %s %q %s, want lease.taken by %s stolen from %s", i, evs[0].Kind, evs[0].Text, evs[0].Data, atts[thief], atts[next])
		}
	}
}
