package fsm

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// scriptLog writes a fixed log exercising every path of Apply: creates,
// multi-command entries across sessions, every error reason, compare-and-
// append, stops, request-id retries, a jump in leader time that prunes the
// dedup table, and configuration, ignorable, empty and unknown entries.
// It uses h only to number and stamp entries; nothing is applied.
func scriptLog(h *harness) []*raft.Log {
	var log []*raft.Log
	add := func(cmds ...*fsmpb.Command) { log = append(log, h.entry(cmds...)) }
	text := strings.Repeat("lorem ipsum ", 20)

	const sessions = 12
	for i := range sessions {
		add(req(fmt.Sprintf("create-%d", i), createFull(fmt.Sprintf("s%02d", i), "t", text)))
	}
	log = append(log, h.rawEntry(raft.LogConfiguration, []byte("config")))
	for round := range 40 {
		var cmds []*fsmpb.Command
		for i := range sessions {
			if (round+i)%3 == 0 {
				continue
			}
			id := fmt.Sprintf("s%02d", i)
			c := appendEv(id, ev("note", text), ev("checkpoint", fmt.Sprint(round)))
			if round%4 == 0 {
				c = req(fmt.Sprintf("app-%d-%d", round, i), c)
			}
			cmds = append(cmds, c)
		}
		// errors of every kind, some of them remembered by request id
		cmds = append(cmds,
			appendEv("ghost", ev("note", "x")),
			req(fmt.Sprintf("bad-%d", round), appendEv("s00", ev("bogus", "x"))),
			appendEv("s03", ev(KindOutput, "not a client kind")),
			appendIf("s01", 2, ev("note", "stale")),
			create("s02"),
		)
		add(cmds...)
		if round%5 == 0 {
			// retries of earlier requests, with new bodies
			add(
				req("create-3", create(fmt.Sprintf("never-%d", round))),
				req(fmt.Sprintf("app-%d-1", round), appendEv("s05", ev("note", "dup"))),
				req(fmt.Sprintf("bad-%d", round), appendEv("s00", ev("note", "dup"))),
			)
		}
		if round == 20 {
			add(stop("s04", ""), stop("s05", "DONE"), stop("s04", "AGAIN"))
			log = append(log, h.rawEntry(raft.LogCommand, nil))
			log = append(log, h.rawEntry(raft.LogCommand, []byte{byte(IgnoreUnknownFlag | 0x05), 1, 2}))
			log = append(log, h.rawEntry(raft.LogCommand, []byte{0x05, 1, 2}))
		}
		if round == 30 {
			// The leader clock jumps past the dedup window: everything
			// remembered so far is forgotten, and a retry applies anew.
			add(at(h.clock+DedupWindow+1, appendEv("s00", ev("note", "much later"))))
			add(req("create-7", create("reborn")))
		}
	}
	return log
}

// replay feeds log to a fresh FSM, grouping entries into ApplyBatch calls
// of the given sizes (cycled), and returns it.
func replay(t *testing.T, log []*raft.Log, sizes ...int) *FSM {
	t.Helper()
	f := newHarness(t).f
	for i, n := 0, 0; i < len(log); n++ {
		end := min(i+sizes[n%len(sizes)], len(log))
		rs := f.ApplyBatch(log[i:end])
		if len(rs) != end-i {
			t.Fatalf("ApplyBatch returned %d responses for %d entries", len(rs), end-i)
		}
		i = end
	}
	return f
}

func TestDeterministicSnapshots(t *testing.T) {
	// Two replicas fed the same entries in the same ApplyBatch calls end
	// with the same snapshot. Not byte for byte: a snapshot is the bbolt
	// file, and bbolt spills the dirty buckets of a transaction in Go map
	// order (Bucket.spill ranges over a map), so the same content lands on
	// different pages. Compare the logical content of the persisted
	// snapshots instead: every key and value of every bucket.
	log := scriptLog(newHarness(t))
	for _, sizes := range [][]int{{1}, {64}, {1, 3, 7, 2}} {
		t.Run(fmt.Sprint(sizes), func(t *testing.T) {
			a, b := replay(t, log, sizes...), replay(t, log, sizes...)
			sa, sb := snapshotBytes(t, a), snapshotBytes(t, b)
			t.Logf("snapshot bytes identical: %v", bytes.Equal(sa, sb))
			ca, cb := snapshotContent(t, sa), snapshotContent(t, sb)
			if ca != cb {
				t.Fatalf("snapshots differ:\n%s", firstDiff(ca, cb))
			}
			if want := dump(t, a, true); ca != want {
				t.Fatalf("snapshot differs from the live state:\n%s", firstDiff(ca, want))
			}
		})
	}
}

// snapshotContent is the canonical dump of a persisted snapshot.
func snapshotContent(t *testing.T, snap []byte) string {
	t.Helper()
	f := newHarness(t).f
	if err := restoreBytes(f, snap); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	return dump(t, f, true)
}

func TestDeterministicAcrossBatching(t *testing.T) {
	// Raft groups committed entries into ApplyBatch calls by timing, so
	// replicas see different groupings. The replicated state must not
	// depend on it: compare the logical content of every bucket (the bytes
	// legitimately differ, since bbolt numbers each transaction).
	log := scriptLog(newHarness(t))
	want := dump(t, replay(t, log, 1), true)
	for _, sizes := range [][]int{{len(log)}, {2}, {64}, {5, 1, 13, 2, 40}} {
		if got := dump(t, replay(t, log, sizes...), true); got != want {
			t.Fatalf("batch sizes %v: state differs from one-entry-per-batch:\n%s", sizes, firstDiff(got, want))
		}
	}
}

func TestScriptLogResults(t *testing.T) {
	// The script log must actually reach the paths it claims to, or the
	// determinism tests prove little.
	h := newHarness(t)
	log := scriptLog(newHarness(t))
	reasons := map[Reason]int{}
	dedupHits := 0
	seen := map[string]bool{}
	for _, l := range log {
		var cmds []*fsmpb.Command
		if l.Type == raft.LogCommand {
			cmds, _, _ = decodeEntry(l.Data)
		}
		rs := results(t, h.f.Apply(l))
		for i, r := range rs {
			reasons[ReasonOf(ResultError(r))]++
			if i < len(cmds) && cmds[i].RequestId != "" {
				if seen[cmds[i].RequestId] {
					dedupHits++
				}
				seen[cmds[i].RequestId] = true
			}
		}
	}
	for _, reason := range []Reason{"", ReasonNotFound, ReasonInvalidArgument, ReasonSeqMismatch, ReasonAlreadyExists, ReasonSessionStopped} {
		if reasons[reason] == 0 {
			t.Errorf("script never produced reason %q", reason)
		}
	}
	if dedupHits == 0 {
		t.Error("script never repeats a request id")
	}
	if _, err := h.f.Session("reborn"); err != nil {
		t.Errorf("retry after the dedup window was not applied anew: %v", err)
	}
	for round := 0; round < 30; round += 5 {
		if _, err := h.f.Session(fmt.Sprintf("never-%d", round)); err == nil {
			t.Errorf("retry in round %d, inside the dedup window, was applied", round)
		}
	}
	if _, err := h.f.Session("never-35"); err != nil {
		t.Errorf("retry in round 35, after the dedup window, was not applied: %v", err)
	}
	if h.f.AppliedIndex() != log[len(log)-1].Index {
		t.Errorf("AppliedIndex %d, want %d", h.f.AppliedIndex(), log[len(log)-1].Index)
	}
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(la), len(lb)) {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n got  %.200s\n want %.200s", i+1, x, y)
		}
	}
	return "(no difference)"
}
