package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// digestLog is a small log of several entry types: sessions created,
// appended to (with request ids, so requests and expiry fill too) and
// stopped, plus a no-op and a configuration entry, which reach no command.
func digestLog(h *harness) []*raft.Log {
	var log []*raft.Log
	for i := range 40 {
		id := fmt.Sprintf("s%02d", i%5)
		switch {
		case i < 5:
			log = append(log, h.entry(req(fmt.Sprintf("c%d", i), create(id))))
		case i == 20:
			log = append(log, h.rawEntry(raft.LogNoop, nil), h.rawEntry(raft.LogConfiguration, []byte("cfg")))
		case i == 37:
			log = append(log, h.entry(stop(id, "done")))
		default:
			log = append(log, h.entry(req(fmt.Sprintf("a%d", i), appendEv(id, ev("note", fmt.Sprint(i))))))
		}
	}
	return log
}

func entriesOf(log []*raft.Log) iter.Seq2[*raft.Log, error] {
	return func(yield func(*raft.Log, error) bool) {
		for _, l := range log {
			if !yield(l, nil) {
				return
			}
		}
	}
}

// liveFrom applies log to a fresh FSM in the given ApplyBatch sizes.
func liveFrom(t *testing.T, log []*raft.Log, size int) *FSM {
	t.Helper()
	f := newHarness(t).f
	for chunk := range slices.Chunk(log, size) {
		f.ApplyBatch(chunk)
	}
	return f
}

func contentOf(t *testing.T, f *FSM) *Content {
	t.Helper()
	c, err := f.Content()
	if err != nil {
		t.Fatalf("Content: %v", err)
	}
	return c
}

func rebuildT(t *testing.T, snap []byte, log []*raft.Log) *FSM {
	t.Helper()
	var r io.Reader // nil: no snapshot
	if snap != nil {
		r = bytes.NewReader(snap)
	}
	f, err := Rebuild(t.TempDir(), r, entriesOf(log), nil)
	if err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// A rebuild from a snapshot plus the entries after it, and one from the
// log alone, equal the live FSM whatever its batching; the digest is of
// content, with the applied index read in the same transaction.
func TestRebuildEqualsLive(t *testing.T) {
	log := digestLog(newHarness(t))
	live := liveFrom(t, log, 7)
	want := contentOf(t, live)
	if last := log[len(log)-1].Index; want.AppliedIndex != last {
		t.Fatalf("applied index %d, want %d", want.AppliedIndex, last)
	}
	if idx, digest, err := live.ContentDigest(); err != nil || idx != want.AppliedIndex || digest != want.Digest {
		t.Fatalf("ContentDigest = %d %s %v, want %d %s", idx, digest, err, want.AppliedIndex, want.Digest)
	}
	if got := contentOf(t, liveFrom(t, log, 1)); got.Digest != want.Digest {
		t.Fatalf("one entry per batch: digest %s, want %s: %v", got.Digest, want.Digest, want.DiffBuckets(got))
	}

	mid := 17
	snap := snapshotBytes(t, liveFrom(t, log[:mid], 3))
	for name, f := range map[string]*FSM{
		"snapshot+log": rebuildT(t, snap, log[mid:]),
		"log":          rebuildT(t, nil, log),
	} {
		got := contentOf(t, f)
		if got.Digest != want.Digest || got.AppliedIndex != want.AppliedIndex {
			t.Errorf("%s: index %d digest %s, want %d %s: %v", name, got.AppliedIndex, got.Digest,
				want.AppliedIndex, want.Digest, want.DiffBuckets(got))
		}
		if d, err := live.FirstDiff(f, want.AppliedIndex); err != nil || d != nil {
			t.Errorf("%s: FirstDiff = %+v, %v; want none", name, d, err)
		}
	}
	// A rebuild one entry short is a different state.
	short := contentOf(t, rebuildT(t, snap, log[mid:len(log)-1]))
	if short.Digest == want.Digest {
		t.Fatal("a rebuild missing the last entry has the live digest")
	}
}

// A key written into the live database behind the log's back is found:
// the digests differ, DiffBuckets names the bucket and FirstDiff the key.
func TestReplayCheckFindsAnExtraKey(t *testing.T) {
	log := digestLog(newHarness(t))
	live := liveFrom(t, log, 5)
	rebuilt := rebuildT(t, nil, log)
	extra := journalKey("s03", 999)
	err := live.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketJournal).Put(extra, []byte("forged")) })
	if err != nil {
		t.Fatal(err)
	}
	a, b := contentOf(t, live), contentOf(t, rebuilt)
	if a.Digest == b.Digest {
		t.Fatal("digests equal after a forged key")
	}
	diffs := a.DiffBuckets(b)
	if len(diffs) != 1 || diffs[0].Bucket != "journal" || diffs[0].Keys != diffs[0].OtherKeys+1 {
		t.Fatalf("DiffBuckets = %+v, want the journal with one key more live", diffs)
	}
	d, err := live.FirstDiff(rebuilt, a.AppliedIndex)
	if err != nil || d == nil || d.Bucket != "journal" || !bytes.Equal(d.Key, extra) || d.Kind != DiffOnlyThis {
		t.Fatalf("FirstDiff = %+v, %v; want the forged journal key only in the live one", d, err)
	}
	// A changed value is found too, and a moved-on FSM is refused.
	err = rebuilt.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJournal).Put(extra, []byte("other"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := live.FirstDiff(rebuilt, 0); d == nil || d.Kind != DiffValue {
		t.Fatalf("FirstDiff after changing the value = %+v, want %q", d, DiffValue)
	}
	if _, err := live.FirstDiff(rebuilt, a.AppliedIndex+1); !errors.Is(err, ErrMovedOn) {
		t.Fatalf("FirstDiff at another index: %v, want ErrMovedOn", err)
	}
}

// Rebuild returns the error of the entry sequence (a log store that lost
// an entry) and the scratch FSM's failures, never panics.
func TestRebuildErrors(t *testing.T) {
	lost := errors.New("log entry 3: log not found")
	entries := func(yield func(*raft.Log, error) bool) {
		h := newHarness(t)
		if yield(h.entry(create("x")), nil) {
			yield(nil, lost)
		}
	}
	if _, err := Rebuild(t.TempDir(), nil, entries, nil); !errors.Is(err, lost) {
		t.Fatalf("Rebuild with a failing log: %v, want %v", err, lost)
	}
	if _, err := Rebuild(t.TempDir(), bytes.NewReader([]byte("not a database")), entriesOf(nil), nil); err == nil {
		t.Fatal("Rebuild from a bad snapshot succeeded")
	}
}
