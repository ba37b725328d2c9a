package fsm

import (
	"slices"
	"testing"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// createOn creates a session placed on node.
func createOn(id, node string) *fsmpb.Command {
	c := create(id)
	c.GetCreateSession().Placement = &fsmpb.Placement{RuntimeAdapter: "echo", Node: node}
	return c
}

func fleetIDs(fl *Fleet) []string {
	var ids []string
	for _, s := range fl.Sessions {
		ids = append(ids, s.Session.SessionId)
	}
	return ids
}

func TestFleetCountsAndPages(t *testing.T) {
	h := newHarness(t)
	h.apply(registerNode(&fsmpb.NodeRecord{Name: "n2", Capacity: 4, RuntimeAdapters: []string{"echo"}}), registerNode(&fsmpb.NodeRecord{Name: "n1", RuntimeAdapters: []string{"echo"}}))
	h.apply(createOn("s1", "n1"), createOn("s2", "n1"), createOn("s3", "n2"), createOn("s4", "n2"), createOn("s5", "n1"))
	h.apply(stop("s2", "done"))
	h.apply(attachT("s3", "a1"), takeLease("s3", "a1", false, 30*sec))

	fl, err := h.f.Fleet("", 100, false)
	if err != nil {
		t.Fatal(err)
	}
	if fl.Active != 4 || fl.Stopped != 1 || fl.MovesOpen != 0 || fl.More {
		t.Fatalf("counts: active %d stopped %d moves %d more %v", fl.Active, fl.Stopped, fl.MovesOpen, fl.More)
	}
	if fl.Hosted["n1"] != 2 || fl.Hosted["n2"] != 2 {
		t.Fatalf("hosted = %v, want n1:2 n2:2 (the stopped s2 not counted)", fl.Hosted)
	}
	if len(fl.Nodes) != 2 || fl.Nodes[0].Name != "n1" || fl.Nodes[1].Capacity != 4 {
		t.Fatalf("nodes = %v", fl.Nodes)
	}
	if fl.AppliedIndex != h.index {
		t.Fatalf("applied index %d, want %d", fl.AppliedIndex, h.index)
	}
	if got := fleetIDs(fl); !slices.Equal(got, []string{"s1", "s3", "s4", "s5"}) {
		t.Fatalf("active page = %v", got)
	}
	for _, s := range fl.Sessions {
		if s.Envelope == nil || s.Envelope.EnvelopeId != s.Session.EnvelopeId {
			t.Fatalf("%s: envelope %v", s.Session.SessionId, s.Envelope)
		}
		if holds := s.LeaseHolder != nil; holds != (s.Session.SessionId == "s3") {
			t.Fatalf("%s: lease holder %v", s.Session.SessionId, s.LeaseHolder)
		}
	}
	if a := fl.Sessions[1].LeaseHolder; a.AttachmentId != "a1" || a.ClientName != "tty-a1" {
		t.Fatalf("s3 lease holder = %v", a)
	}

	// Pages of two, stopped included, walk every session exactly once.
	var walked []string
	after := ""
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatal("paging does not end")
		}
		fl, err := h.f.Fleet(after, 2, true)
		if err != nil {
			t.Fatal(err)
		}
		if fl.Active != 4 || fl.Stopped != 1 {
			t.Fatalf("page %d counts: active %d stopped %d", page, fl.Active, fl.Stopped)
		}
		walked = append(walked, fleetIDs(fl)...)
		if !fl.More {
			break
		}
		after = fl.Sessions[len(fl.Sessions)-1].Session.SessionId
	}
	if !slices.Equal(walked, []string{"s1", "s2", "s3", "s4", "s5"}) {
		t.Fatalf("walked %v", walked)
	}
	// A page that ends exactly at the last session says no more follow.
	if fl, _ := h.f.Fleet("s3", 2, false); !slices.Equal(fleetIDs(fl), []string{"s4", "s5"}) || fl.More {
		t.Fatalf("last page = %v more %v", fleetIDs(fl), fl.More)
	}
}
