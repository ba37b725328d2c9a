package fsm

import (
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

func TestConcurrentReadsSnapshotsAndApply(t *testing.T) {
	// raft applies on one goroutine while snapshots persist on another and
	// API handlers read; run them together under -race. Readers must always
	// see a consistent journal (head == number of events).
	h := newHarness(t)
	h.apply1(create("s1"))
	log := make([]*raft.Log, 200)
	for i := range log {
		log[i] = h.entry(appendEv("s1", ev("note", "x")), create(reqID(i)))
	}

	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for i := 0; i < len(log); i += 10 {
			h.f.ApplyBatch(log[i : i+10])
		}
	})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				evs, head, err := h.f.Events("s1", 1, 1<<20)
				if err != nil || uint64(len(evs)) != head {
					t.Errorf("Events: %d events, head %d, err %v", len(evs), head, err)
					return
				}
				if _, _, err := h.f.Sessions("", 50); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			snap, err := h.f.Snapshot()
			if err != nil {
				t.Error(err)
				return
			}
			var sink memSink
			err = snap.Persist(&sink)
			snap.Release()
			if err != nil || sink.Len() == 0 {
				t.Errorf("Persist: %d bytes, err %v", sink.Len(), err)
			}
		}
	})
	wg.Wait()
	if s := h.session("s1"); s.HeadSeq != 2+uint64(len(log)) {
		t.Fatalf("head %d, want %d", s.HeadSeq, 2+len(log))
	}
}
