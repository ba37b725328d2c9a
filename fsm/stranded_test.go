package fsm

import (
	"testing"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

func createManual(id, recover string) *fsmpb.Command {
	c := create(id)
	c.GetCreateSession().Placement = sourcePlacement()
	c.GetCreateSession().Policy = &fsmpb.Policy{Recover: recover}
	return c
}

func TestCreateSessionRecoverPolicy(t *testing.T) {
	h := newHarness(t)
	for id, want := range map[string]bool{"auto": false, "empty": false, "manual": true} {
		rec := id
		if id == "empty" {
			rec = ""
		}
		wantErr(t, h.apply1(createManual(id, rec)), "")
		if got := h.session(id).RecoverManual; got != want {
			t.Fatalf("%s: recover_manual %v, want %v", id, got, want)
		}
	}
	h.refused(createManual("bad", "sometimes"), ReasonInvalidArgument)

	// Children of clear, new and fork inherit it.
	wantErr(t, h.apply1(forkCmd("manual", 2, "forked", "")), "")
	wantErr(t, h.apply1(clearCmd("manual", "clear", "", "", "p1")), "")
	if !h.session("forked").RecoverManual {
		t.Fatal("fork lost recover_manual")
	}
	var child string
	for _, id := range h.sessionIDs() {
		if s := h.session(id); s.ParentSession == "manual" && s.BoundarySource == "clear" {
			child = id
		}
	}
	if child == "" || !h.session(child).RecoverManual {
		t.Fatalf("clear child %q lost recover_manual", child)
	}
}

func (h *harness) sessionIDs() []string {
	h.t.Helper()
	ss, _, err := h.f.Sessions("", 1000)
	if err != nil {
		h.t.Fatalf("ListSessions: %v", err)
	}
	ids := make([]string, len(ss))
	for i, s := range ss {
		ids[i] = s.SessionId
	}
	return ids
}

func TestMarkStranded(t *testing.T) {
	h := newHarness(t)
	wantErr(t, h.apply1(createManual("s1", RecoverManual)), "")
	head := h.session("s1").HeadSeq

	h.refused(markStranded("s1", "", true), ReasonInvalidArgument)
	h.refused(markStranded("s1", "n2", true), ReasonInvalidArgument) // runs on n1
	h.refused(markStranded("nope", "n1", true), ReasonNotFound)
	h.noOp(markStranded("s1", "n1", false)) // not stranded

	r := h.apply1(at(h.clock+sec, markStranded("s1", "n1", true)))
	wantErr(t, r, "")
	s := h.session("s1")
	if !s.Stranded || s.StrandedNode != "n1" || s.HeadSeq != head+1 || !r.GetSession().Stranded {
		t.Fatalf("after marking: %v", s)
	}
	h.wantEvent("s1", head+1, KindSessionStranded, "stranded: compute node dead (n1)",
		`{"node":"n1","stranded":true,"reason":"compute node dead"}`, h.session("s1").UpdatedUnixNano)
	h.noOp(markStranded("s1", "n1", true)) // once

	wantErr(t, h.apply1(markStranded("s1", "n1", false)), "")
	s = h.session("s1")
	if s.Stranded || s.StrandedNode != "" || s.HeadSeq != head+2 {
		t.Fatalf("after unmarking: %v", s)
	}
	if e := h.event("s1", head+2); e.Kind != KindSessionStranded || string(e.Data) != `{"node":"n1","stranded":false,"reason":"compute node alive"}` {
		t.Fatalf("unmark event %v", e)
	}

	// No marking while a move is open; none on a stopped session.
	wantErr(t, h.apply1(moveTo("s1", "m1", "n2")), "")
	h.refused(markStranded("s1", "n1", true), ReasonBusy)
	wantErr(t, h.apply1(moveFail("s1", "m1", "x", false)), "")
	wantErr(t, h.apply1(stop("s1", "")), "")
	h.refused(markStranded("s1", "n1", true), ReasonSessionStopped)
}

func TestCutoverClearsStranded(t *testing.T) {
	// An operator's (recovery-caused) move of a stranded session clears the
	// mark at cutover, with a session.stranded event before the epoch change.
	h := newHarness(t)
	mover(t, h, "s1")
	wantErr(t, h.apply1(markStranded("s1", "n1", true)), "")
	s := h.driveMove("s1", "m1", MoveCutoverCommitted)
	if s.Stranded || s.StrandedNode != "" || s.Placement.Node != "n2" {
		t.Fatalf("after cutover: stranded %v on %q, placement %v", s.Stranded, s.StrandedNode, s.Placement)
	}
	if n := h.countKind("s1", KindSessionStranded); n != 2 {
		t.Fatalf("%d session.stranded events, want 2", n)
	}
	var strandedAt, epochAt uint64
	evs, _, _ := h.f.Events("s1", 1, 1<<20)
	for _, e := range evs {
		switch {
		case e.Kind == KindSessionStranded && string(e.Data) == `{"node":"n1","stranded":false,"reason":"moved"}`:
			strandedAt = e.Seq
		case e.Kind == KindEpochChanged:
			epochAt = e.Seq
		}
	}
	if strandedAt == 0 || strandedAt+1 != epochAt {
		t.Fatalf("unmark at #%d, epoch change at #%d", strandedAt, epochAt)
	}
}
