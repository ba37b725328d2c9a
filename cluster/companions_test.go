package cluster

import (
	"context"
	"slices"
	"testing"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// A command's companions go into its entry right behind it, in order,
// stamped with its time; the caller gets its own command's result and each
// companion's Done gets the companion's — whether the command went alone
// or queued behind a full pipeline.
func TestApplierProposesCompanionsInTheSameEntry(t *testing.T) {
	r := newApplierRig(t)
	got := map[string]string{}
	fn := CompanionsFunc(func(cmd *fsmpb.Command) []Companion {
		if cmd.RequestId != "lead" && cmd.RequestId != "queued-lead" {
			return nil
		}
		var out []Companion
		for _, suffix := range []string{"-a", "-b"} {
			id := cmd.RequestId + suffix
			out = append(out, Companion{Cmd: note(id), Done: func(res *fsmpb.Result) { got[id] = res.GetAppend().GetSessionId() }})
		}
		return out
	})
	r.a.companions.Store(&fn)

	r.fsm.open()
	cmd := note("lead")
	res, err := r.a.submit(context.Background(), cmd)
	if err != nil || res.GetAppend().GetSessionId() != "result of lead" {
		t.Fatalf("submit: %v, %v", res, err)
	}
	if !slices.Equal(r.obs.proposed(), []int{3}) {
		t.Fatalf("entries proposed %v, want one of 3 commands", r.obs.proposed())
	}
	if e := r.fsm.applied(); len(e) != 1 || !slices.Equal(e[0], []string{"lead", "lead-a", "lead-b"}) {
		t.Fatalf("entries applied %v, want [lead lead-a lead-b]", e)
	}
	if got["lead-a"] != "result of lead-a" || got["lead-b"] != "result of lead-b" {
		t.Fatalf("companions' results %v", got)
	}
}

// Queued behind a full pipeline, a command keeps its companions with it
// inside the larger entry, and the results still reach their owners.
func TestApplierKeepsCompanionsTogetherInABatch(t *testing.T) {
	r := newApplierRig(t)
	done := make(chan string, 2)
	fn := CompanionsFunc(func(cmd *fsmpb.Command) []Companion {
		if cmd.RequestId != "q1" {
			return nil
		}
		return []Companion{{Cmd: note("q1-next"), Done: func(res *fsmpb.Result) { done <- res.GetAppend().GetSessionId() }}}
	})
	r.a.companions.Store(&fn)
	lone, plug := r.stall(t)
	var calls []*call
	for _, id := range []string{"q0", "q1", "q2"} {
		calls = append(calls, r.submit(id))
		r.queued(t, len(calls))
	}
	r.fsm.open()
	for _, c := range append(lone, calls...) {
		c.wantResult(t)
	}
	<-plug.done
	if res := <-done; res != "result of q1-next" {
		t.Fatalf("companion's result %q", res)
	}
	entries := r.fsm.applied()
	if last := entries[len(entries)-1]; !slices.Equal(last, []string{"plug", "q0", "q1", "q1-next", "q2"}) {
		t.Fatalf("last entry %v, want plug q0 q1 q1-next q2", last)
	}
}
