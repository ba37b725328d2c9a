package fsm

import (
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// An entry whose command needs later rules, or holds a command type this
// build does not know, is never skipped: the FSM stops there, keeps what
// it applied before (in the same batch too), answers every later entry
// with RULES_UNKNOWN, refuses snapshots, and says why.
func TestUnknownRulesHaltTheFSM(t *testing.T) {
	newer := create("s3")
	newer.RuleVersion = RuleVersion + 1
	unknownType := create("s4")
	unknownType.Body = nil
	// Field 99 of Command: a body this build has no oneof case for.
	unknownType.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 99, protowire.BytesType), []byte("x")))
	for name, cmd := range map[string]*fsmpb.Command{"a later rule version": newer, "an unknown command type": unknownType} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.apply1(create("s1"))
			ok := h.entry(create("s2"))
			bad := h.entry(cmd)
			after := h.entry(create("s5"))
			out := h.f.ApplyBatch([]*raft.Log{ok, bad, after})
			if rs := results(t, out[0]); len(rs) != 1 || rs[0].Error != nil {
				t.Fatalf("the entry before the halt: %v", rs)
			}
			for _, i := range []int{1, 2} {
				rs := results(t, out[i])
				if len(rs) != 1 {
					t.Fatalf("entry %d: %d results", i, len(rs))
				}
				wantErr(t, rs[0], ReasonRulesUnknown)
			}
			halt := h.f.Halted()
			if halt == nil || halt.Index != bad.Index || !strings.Contains(halt.Error(), "upgrade this node") {
				t.Fatalf("Halted() = %v, want a halt at %d", halt, bad.Index)
			}
			if h.f.AppliedIndex() != ok.Index {
				t.Fatalf("applied index %d, want %d (the last entry before the halt)", h.f.AppliedIndex(), ok.Index)
			}
			for _, id := range []string{"s1", "s2"} {
				if _, err := h.f.Session(id); err != nil {
					t.Fatalf("session %s applied before the halt: %v", id, err)
				}
			}
			for _, id := range []string{"s3", "s4", "s5"} {
				if _, err := h.f.Session(id); err == nil {
					t.Fatalf("session %s applied at or after the halt", id)
				}
			}
			// Later entries: refused, the state unchanged.
			before := h.state()
			rs := results(t, h.f.Apply(h.entry(create("s6"))))
			if len(rs) != 1 {
				t.Fatalf("after the halt: %v", rs)
			}
			wantErr(t, rs[0], ReasonRulesUnknown)
			if h.state() != before || h.f.AppliedIndex() != ok.Index {
				t.Fatal("an entry after the halt changed the state")
			}
			if _, err := h.f.Snapshot(); err == nil {
				t.Fatal("a halted FSM took a snapshot")
			}
		})
	}
}

// Every command this build knows needs a version it applies.
func TestCommandsOfThisBuildNeedKnownRules(t *testing.T) {
	for _, c := range []*fsmpb.Command{create("s1"), appendEv("s1", ev(KindNote, "x"))} {
		if v := CommandRuleVersion(c); v == 0 || v > RuleVersion {
			t.Fatalf("%T needs rule version %d; this build applies up to %d", c.Body, v, RuleVersion)
		}
	}
}

// A command of a later rule version waits for every voter's build: voters
// whose record advertises less (or nothing: version 1) are named.
func TestUpgradeBlockers(t *testing.T) {
	recs := []*fsmpb.NodeRecord{
		{Name: "n1", RuleVersion: 2}, {Name: "n2", RuleVersion: 1}, {Name: "n3"}, {Name: "n5", RuleVersion: 3},
	}
	voters := []string{"n1", "n2", "n3", "n4"}
	for _, tc := range []struct {
		need uint32
		want string
	}{
		{0, ""}, {1, ""},
		{2, "n2 (rule version 1), n3 (rule version 1), n4 (rule version 1)"},
		{3, "n1 (rule version 2), n2 (rule version 1), n3 (rule version 1), n4 (rule version 1)"},
	} {
		got := strings.Join(UpgradeBlockers(tc.need, voters, recs), ", ")
		if got != tc.want {
			t.Errorf("need %d: blockers %q, want %q", tc.need, got, tc.want)
		}
	}
	if got := UpgradeBlockers(3, []string{"n5"}, recs); got != nil {
		t.Errorf("a fleet of version-3 voters blocks version 3: %v", got)
	}
	e := UpgradeInProgress(2, UpgradeBlockers(2, voters, recs))
	if e.Reason != ReasonUpgradeInProgress || !strings.Contains(e.Message, "n2 (rule version 1)") {
		t.Errorf("refusal %v", e)
	}
}
