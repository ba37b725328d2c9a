package fsm

import (
	"testing"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The change feed names each session an applied batch wrote, once per
// batch, with its node and whether the write can give its runner work: a
// runner's own events and charges cannot.
func TestChangeFeed(t *testing.T) {
	h := newHarness(t)
	cursor := h.f.ChangeCursor()
	c := create("s1")
	c.GetCreateSession().Placement = &fsmpb.Placement{Node: "n2"}
	h.apply(c, create("s2"), attachT("s1", "a"), takeLease("s1", "a", false, 30*sec))
	got, next, ok := h.f.ChangesSince(cursor)
	if !ok || len(got) != 2 || got[0] != (SessionChange{SessionID: "s1", Node: "n2", NeedsRunner: true}) || got[1].SessionID != "s2" {
		t.Fatalf("changes %+v (ok %v), want s1 on n2 then s2, once each", got, ok)
	}
	if again, _, _ := h.f.ChangesSince(next); len(again) != 0 {
		t.Fatalf("changes since the last cursor: %+v, want none", again)
	}

	h.apply1(submitInput("s1", "a", 1, "hi"))
	got, next, _ = h.f.ChangesSince(next)
	if len(got) != 1 || !got[0].NeedsRunner {
		t.Fatalf("after an input: %+v, want s1 needing its runner", got)
	}
	if seq, ok := NextTurnInput(mustSession(t, h, "s1")); !ok || seq != mustSession(t, h, "s1").HeadSeq {
		t.Fatalf("NextTurnInput = %d, %v; want the input at the head", seq, ok)
	}
	h.apply1(runnerAppend("s1", 1, ev(KindTurnStarted, "")))
	h.apply1(recordUsage("s1", &fsmpb.Budget{Turns: 1}, 0))
	got, next, _ = h.f.ChangesSince(next)
	if len(got) != 2 || got[0].NeedsRunner || got[1].NeedsRunner {
		t.Fatalf("after the runner's own writes: %+v, want two changes needing no runner", got)
	}
	if _, ok := NextTurnInput(mustSession(t, h, "s1")); ok {
		t.Fatal("NextTurnInput with a turn running")
	}

	// Too far behind, or behind a restore: not served.
	if _, _, ok := h.f.ChangesSince(next - 3); !ok {
		t.Fatal("a recent cursor was not served")
	}
	for range changeFeedSize + 1 {
		h.apply1(runnerAppend("s1", 1, ev(KindOutput, "x")))
	}
	if _, _, ok := h.f.ChangesSince(next); ok {
		t.Fatal("a cursor more than changeFeedSize behind was served")
	}
	cur := h.f.ChangeCursor()
	snap := snapshotBytes(t, h.f)
	if err := restoreBytes(h.f, snap); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := h.f.ChangesSince(cur); ok {
		t.Fatal("a cursor from before a restore was served")
	}
	if got, _, ok := h.f.ChangesSince(h.f.ChangeCursor()); !ok || len(got) != 0 {
		t.Fatalf("a cursor taken after the restore: %+v, %v", got, ok)
	}
}

// WithInput rebuilds a session one input ahead of the replica exactly as
// applying the input does, and only from the state that allows it.
func TestWithInput(t *testing.T) {
	h := newHarness(t)
	h.apply(create("s1"), attachT("s1", "a"), takeLease("s1", "a", false, 30*sec))
	before := mustSession(t, h, "s1")
	h.apply1(submitInput("s1", "a", 1, "hi"))
	after := mustSession(t, h, "s1")
	view, ok := WithInput(before, 1, after.HeadSeq)
	if !ok || view.HeadSeq != after.HeadSeq || len(view.QueuedInputs) != 1 || view.QueuedInputs[0] != after.HeadSeq {
		t.Fatalf("WithInput = %v, %v; want the state after the input %v", view, ok, after)
	}
	if before.HeadSeq == view.HeadSeq {
		t.Fatal("WithInput changed its argument")
	}
	for name, args := range map[string][2]uint64{"another epoch": {2, after.HeadSeq}, "two events behind": {1, after.HeadSeq + 1}} {
		if _, ok := WithInput(before, args[0], args[1]); ok {
			t.Errorf("%s: WithInput accepted", name)
		}
	}
	if _, ok := WithInput(after, 1, after.HeadSeq+1); ok {
		t.Error("WithInput accepted a session with an input already queued")
	}
}

func mustSession(t *testing.T, h *harness, id string) *fsmpb.Session {
	t.Helper()
	s, err := h.f.Session(id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
