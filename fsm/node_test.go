package fsm

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Node records (RegisterNode, SetDraining) and the placement reads.

// nodeRecord is a node as fak agent registers it.
func nodeRecord(name string) *fsmpb.NodeRecord {
	return &fsmpb.NodeRecord{
		Name: name, ApiAddr: name + ":7400", RaftAddr: name + ":7401",
		Labels:          []*fsmpb.Label{{Key: "rack", Value: "r1"}, {Key: "zone", Value: "z1"}},
		RuntimeAdapters: []string{"echo", "exec"}, Providers: []string{"anthropic"}, Models: []string{"opus", "sonnet"},
		AccountRefs: []string{"work"}, Capacity: 8,
	}
}

// nodes reads every node record.
func (h *harness) nodes() []*fsmpb.NodeRecord {
	h.t.Helper()
	ns, err := h.f.Nodes()
	if err != nil {
		h.t.Fatalf("Nodes: %v", err)
	}
	return ns
}

// node reads one node record, or nil.
func (h *harness) node(name string) *fsmpb.NodeRecord {
	h.t.Helper()
	for _, n := range h.nodes() {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// wantNode fails unless r is a successful node result equal to want (no-op
// or not, as given) and the stored record equals want.
func (h *harness) wantNode(r *fsmpb.Result, noOp bool, want *fsmpb.NodeRecord) {
	h.t.Helper()
	wantErr(h.t, r, "")
	if r.NoOp != noOp || !proto.Equal(r.GetNode(), want) {
		h.t.Fatalf("result %v, want node %v (no-op %v)", r, want, noOp)
	}
	if got := h.node(want.Name); !proto.Equal(got, want) {
		h.t.Fatalf("stored node %v, want %v", got, want)
	}
}

func TestRegisterNode(t *testing.T) {
	h := newHarness(t)
	if ns := h.nodes(); len(ns) != 0 {
		t.Fatalf("a fresh FSM has nodes %v", ns)
	}
	t1 := h.clock + sec
	r := h.apply1(at(t1, registerNode(nodeRecord("n1"))))
	want := nodeRecord("n1")
	want.UpdatedUnixNano = t1
	h.wantNode(r, false, want)

	// Re-registering replaces the record (a restart with other flags) and
	// stamps it again; nothing is journaled anywhere.
	before := h.state()
	t2 := t1 + sec
	changed := nodeRecord("n1")
	changed.Capacity, changed.Models, changed.Labels = 2, []string{"haiku"}, nil
	r = h.apply1(at(t2, registerNode(changed)))
	want = proto.Clone(changed).(*fsmpb.NodeRecord)
	want.UpdatedUnixNano = t2
	h.wantNode(r, false, want)
	if h.state() == before {
		t.Fatal("re-registering changed nothing")
	}
	// The command's time, never the record's own.
	stamped := nodeRecord("n1")
	stamped.UpdatedUnixNano = 12345
	r = h.apply1(at(t2+sec, registerNode(stamped)))
	if got := r.GetNode().UpdatedUnixNano; got != t2+sec {
		t.Fatalf("updated %d, want the command time %d", got, t2+sec)
	}
}

func TestRegisterNodeKeepsDraining(t *testing.T) {
	// Draining is the operator's: a node re-registering (restarting) does
	// not clear it, nor set it.
	h := newHarness(t)
	wantErr(t, h.apply1(registerNode(nodeRecord("n1"))), "")
	t1 := h.clock + sec
	r := h.apply1(at(t1, setDraining("n1", true)))
	want := nodeRecord("n1")
	want.Draining, want.UpdatedUnixNano = true, t1
	h.wantNode(r, false, want)

	t2 := t1 + sec
	r = h.apply1(at(t2, registerNode(nodeRecord("n1")))) // says draining=false
	want.UpdatedUnixNano = t2
	h.wantNode(r, false, want)

	wantErr(t, h.apply1(setDraining("n1", false)), "")
	undrained := nodeRecord("n1")
	undrained.Draining = true // a record claiming draining does not drain
	r = h.apply1(registerNode(undrained))
	if r.GetNode().Draining || h.node("n1").Draining {
		t.Fatalf("re-registering set draining: %v", r.GetNode())
	}
}

func TestSetDraining(t *testing.T) {
	h := newHarness(t)
	wantErr(t, h.apply1(registerNode(nodeRecord("n1"))), "")
	reg := h.node("n1")

	// The same value is a no-op that changes nothing, not even the time.
	r := h.noOp(setDraining("n1", false))
	if !proto.Equal(r.GetNode(), reg) {
		t.Fatalf("no-op result %v, want %v", r.GetNode(), reg)
	}
	t1 := h.clock + sec
	r = h.apply1(at(t1, setDraining("n1", true)))
	want := proto.Clone(reg).(*fsmpb.NodeRecord)
	want.Draining, want.UpdatedUnixNano = true, t1
	h.wantNode(r, false, want)
	r = h.noOp(setDraining("n1", true))
	if !proto.Equal(r.GetNode(), want) {
		t.Fatalf("no-op result %v, want %v", r.GetNode(), want)
	}
	t2 := t1 + sec
	r = h.apply1(at(t2, setDraining("n1", false)))
	want.Draining, want.UpdatedUnixNano = false, t2
	h.wantNode(r, false, want)

	wantErrMsg(t, h.refused(setDraining("n9", true), ReasonNotFound), ReasonNotFound, "node n9")
	h.refuseAll(t, []refusal{
		{"unknown node, undrain", setDraining("n9", false), ReasonNotFound},
		{"no node name", setDraining("", true), ReasonNotFound},
	})
}

func TestRegisterNodeValidation(t *testing.T) {
	h := newHarness(t)
	wantErr(t, h.apply1(registerNode(nodeRecord("n1"))), "")
	withLabels := func(kv ...string) *fsmpb.Command {
		n := nodeRecord("n2")
		n.Labels = nil
		for i := 0; i < len(kv); i += 2 {
			n.Labels = append(n.Labels, &fsmpb.Label{Key: kv[i], Value: kv[i+1]})
		}
		return registerNode(n)
	}
	edit := func(fn func(n *fsmpb.NodeRecord)) *fsmpb.Command {
		n := nodeRecord("n1")
		fn(n)
		return registerNode(n)
	}
	many := make([]string, 257)
	for i := range many {
		many[i] = fmt.Sprintf("x%03d", i)
	}
	var tooManyLabels []string
	for i := range 65 {
		tooManyLabels = append(tooManyLabels, fmt.Sprintf("k%02d", i), "v")
	}
	h.refuseAll(t, []refusal{
		{"no record", registerNode(nil), ReasonInvalidArgument},
		{"no name", edit(func(n *fsmpb.NodeRecord) { n.Name = "" }), ReasonInvalidArgument},
		{"name too long", edit(func(n *fsmpb.NodeRecord) { n.Name = strings.Repeat("n", MaxPlacementFieldBytes+1) }), ReasonInvalidArgument},
		{"labels unsorted", withLabels("zone", "z1", "rack", "r1"), ReasonInvalidArgument},
		{"labels unsorted, case", withLabels("b", "1", "B", "2"), ReasonInvalidArgument},
		{"too many labels", withLabels(tooManyLabels...), ReasonInvalidArgument},
		{"too many adapters", edit(func(n *fsmpb.NodeRecord) { n.RuntimeAdapters = many }), ReasonInvalidArgument},
		{"too many providers", edit(func(n *fsmpb.NodeRecord) { n.Providers = many }), ReasonInvalidArgument},
		{"too many models", edit(func(n *fsmpb.NodeRecord) { n.Models = many }), ReasonInvalidArgument},
		{"too many account refs", edit(func(n *fsmpb.NodeRecord) { n.AccountRefs = many }), ReasonInvalidArgument},
	})
	// Limits are inclusive; sorted labels of any number up to 64 pass.
	var maxLabels []string
	for i := range 64 {
		maxLabels = append(maxLabels, fmt.Sprintf("k%02d", i), "v")
	}
	wantErr(t, h.apply1(withLabels(maxLabels...)), "")
	wantErr(t, h.apply1(edit(func(n *fsmpb.NodeRecord) { n.Models = many[:256] })), "")
	wantErr(t, h.apply1(edit(func(n *fsmpb.NodeRecord) { n.Name = strings.Repeat("n", MaxPlacementFieldBytes) })), "")
	wantErr(t, h.apply1(withLabels()), "")
}

func TestNodesOrderedByName(t *testing.T) {
	h := newHarness(t)
	for _, name := range []string{"n3", "n10", "n1", "a"} {
		wantErr(t, h.apply1(registerNode(nodeRecord(name))), "")
	}
	var names []string
	for _, n := range h.nodes() {
		names = append(names, n.Name)
	}
	if want := []string{"a", "n1", "n10", "n3"}; !slices.Equal(names, want) {
		t.Fatalf("Nodes() = %v, want %v", names, want)
	}
}

func TestPlacementScan(t *testing.T) {
	h := newHarness(t)
	place := func(id, node string) {
		c := create(id)
		c.GetCreateSession().Placement = &fsmpb.Placement{Node: node}
		wantErr(t, h.apply1(c), "")
	}
	place("a1", "n1")
	place("a2", "n1")
	place("b1", "n2")
	place("c1", "n3")
	place("x", "")
	place("gone", "n1")
	wantErr(t, h.apply1(stop("gone", "")), "")
	mover(t, h, "m") // on n1
	wantErr(t, h.apply1(moveTo("m", "mv", "n2")), "")
	wantErr(t, h.apply1(moveTo("b1", "mv", "n3")), "")
	wantErr(t, h.apply1(moveFail("b1", "mv", "x", false)), "") // ended: not moving

	scan := func(on map[string]bool) (map[string]int, []string, []string) {
		t.Helper()
		load, moving, hosted, err := h.f.PlacementScan(on)
		if err != nil {
			t.Fatalf("PlacementScan: %v", err)
		}
		return load, sessionIDs(moving), sessionIDs(hosted)
	}
	load, moving, hosted := scan(map[string]bool{"n1": true})
	if want := map[string]int{"n1": 3, "n2": 1, "n3": 1, "": 1}; fmt.Sprint(load) != fmt.Sprint(want) {
		t.Fatalf("load %v, want %v (stopped sessions do not count)", load, want)
	}
	if !slices.Equal(moving, []string{"m"}) || !slices.Equal(hosted, []string{"a1", "a2", "m"}) {
		t.Fatalf("moving %v hosted %v", moving, hosted)
	}
	if _, _, hosted := scan(nil); hosted != nil {
		t.Fatalf("hosted on no node: %v", hosted)
	}
	if _, _, hosted := scan(map[string]bool{"n2": true, "n3": true, "n9": true}); !slices.Equal(hosted, []string{"b1", "c1"}) {
		t.Fatalf("hosted on n2, n3: %v", hosted)
	}

	// The cutover moves the load; the move is no longer open.
	h.driveMove("m", "mv", MoveCutoverCommitted)
	load, moving, hosted = scan(map[string]bool{"n2": true})
	if load["n1"] != 2 || load["n2"] != 2 || len(moving) != 0 || !slices.Equal(hosted, []string{"b1", "m"}) {
		t.Fatalf("after the cutover: load %v moving %v hosted %v", load, moving, hosted)
	}
}
