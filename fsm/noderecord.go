package fsm

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Node records: each node's capabilities as it registered them (runtime
// adapters, providers, models, account refs, labels), which placement
// admits sessions against, and whether an operator is draining it. A node
// registering again keeps its draining flag.

func (a *applier) registerNode(c *fsmpb.Command, cmd *fsmpb.RegisterNode) (*fsmpb.Result, *Error) {
	n := cmd.Node
	if n == nil || n.Name == "" || len(n.Name) > MaxPlacementFieldBytes {
		return nil, errorf(ReasonInvalidArgument, "a node record needs a name of 1-%d bytes", MaxPlacementFieldBytes)
	}
	for _, list := range [][]string{n.RuntimeAdapters, n.Providers, n.Models, n.AccountRefs, n.RuntimeApprovals, n.RuntimeMeters} {
		if len(list) > 256 {
			return nil, errorf(ReasonInvalidArgument, "node capability lists are limited to 256 entries")
		}
	}
	if len(n.Labels) > 64 || !slices.IsSortedFunc(n.Labels, func(x, y *fsmpb.Label) int {
		switch {
		case x.Key < y.Key:
			return -1
		case x.Key > y.Key:
			return 1
		}
		return 0
	}) {
		return nil, errorf(ReasonInvalidArgument, "node labels: at most 64, sorted by key")
	}
	rec := proto.Clone(n).(*fsmpb.NodeRecord)
	if old := a.loadNode(n.Name); old != nil {
		rec.Draining = old.Draining
	}
	rec.UpdatedUnixNano = c.TimeUnixNano
	a.putNode(rec)
	return &fsmpb.Result{Body: &fsmpb.Result_Node{Node: rec}}, nil
}

func (a *applier) setDraining(c *fsmpb.Command, cmd *fsmpb.SetDraining) (*fsmpb.Result, *Error) {
	rec := a.loadNode(cmd.Node)
	if rec == nil {
		return nil, errorf(ReasonNotFound, "node %s not found", cmd.Node)
	}
	if rec.Draining == cmd.Draining {
		return &fsmpb.Result{NoOp: true, Body: &fsmpb.Result_Node{Node: rec}}, nil
	}
	rec.Draining = cmd.Draining
	rec.UpdatedUnixNano = c.TimeUnixNano
	a.putNode(rec)
	return &fsmpb.Result{Body: &fsmpb.Result_Node{Node: rec}}, nil
}

func (a *applier) loadNode(name string) *fsmpb.NodeRecord {
	raw := a.nodes.Get([]byte(name))
	if raw == nil {
		return nil
	}
	var n fsmpb.NodeRecord
	if err := proto.Unmarshal(raw, &n); err != nil {
		panic("fsm: corrupt node record: " + err.Error())
	}
	return &n
}

func (a *applier) putNode(n *fsmpb.NodeRecord) {
	buf, err := proto.Marshal(n)
	if err != nil {
		panic("fsm: marshal node: " + err.Error())
	}
	a.must(a.nodes.Put([]byte(n.Name), buf))
}

// The admission check a draining node fails (placement.Admit and the
// FSM's own refusal of a placement on it say it alike).
const (
	CheckNotDraining = "not_draining"
	WhyDraining      = "the node is draining"
)

// checkPlacement refuses a placement no node could run, or that names a
// node admitting no session: the named node's record says it is draining
// (NOT_ADMITTED, with the admission's not_draining check), its runtime
// adapter is advertised by no node record, or the named node has a record
// without it (NO_SUCH_RUNTIME, naming the runtimes there are). The
// external runtime runs on no node and is exempt. With no node record at
// all nothing is refused: the leader commits the records just after a
// fleet forms, and a session created before that is run once they exist.
func (a *applier) checkPlacement(p *fsmpb.Placement) *Error {
	if IsExternal(p) {
		return nil
	}
	if node := p.GetNode(); node != "" {
		if raw := a.nodes.Get([]byte(node)); raw != nil {
			var n fsmpb.NodeRecord
			if err := proto.Unmarshal(raw, &n); err != nil {
				panic("fsm: corrupt node record: " + err.Error())
			}
			if n.Draining {
				return errorf(ReasonNotAdmitted, "node %s refused: %s: %s", node, CheckNotDraining, WhyDraining)
			}
		}
	}
	rt := p.GetRuntimeAdapter()
	if rt == "" {
		return nil
	}
	var fleet []string
	records, found := 0, false
	cur := a.nodes.Cursor() // in key order: the same on every replica
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		records++
		var n fsmpb.NodeRecord
		if err := proto.Unmarshal(v, &n); err != nil {
			panic("fsm: corrupt node record: " + err.Error())
		}
		if n.Name == p.GetNode() && !slices.Contains(n.RuntimeAdapters, rt) {
			return errorf(ReasonNoSuchRuntime, "node %s has no runtime %q (it has %s)", n.Name, rt, listOrNone(n.RuntimeAdapters))
		}
		found = found || slices.Contains(n.RuntimeAdapters, rt)
		fleet = append(fleet, n.RuntimeAdapters...)
	}
	if found || records == 0 {
		return nil
	}
	slices.Sort(fleet)
	return errorf(ReasonNoSuchRuntime, "no node of the fleet has runtime %q (the fleet has %s)", rt, listOrNone(slices.Compact(fleet)))
}

// stampApprovals sets p.Approvals to the approval policy its runtime runs
// by, as the node records advertise it: the placement's own node's, else
// the first record's in key order that has the runtime (nodes share
// runtime blocks). "" means fak's clients answer the runtime's approvals.
func (a *applier) stampApprovals(p *fsmpb.Placement) {
	p.Approvals = ""
	if IsExternal(p) || p.GetRuntimeAdapter() == "" {
		return
	}
	found := false
	cur := a.nodes.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		var n fsmpb.NodeRecord
		if err := proto.Unmarshal(v, &n); err != nil {
			panic("fsm: corrupt node record: " + err.Error())
		}
		if !slices.Contains(n.RuntimeAdapters, p.RuntimeAdapter) || found && n.Name != p.Node {
			continue
		}
		found = true
		p.Approvals = ""
		for _, ra := range n.RuntimeApprovals {
			if name, policy, ok := strings.Cut(ra, "="); ok && name == p.RuntimeAdapter {
				p.Approvals = policy
			}
		}
	}
}

// listOrNone is "a, b, c", or "none".
func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// MeteredBy is what meters the model calls of a session on runtime of the
// node rec: "gateway", "cli", "runtime" (the node record's runtime_meters),
// or "" when the record says nothing of it (echo, exec, external).
func MeteredBy(rec *fsmpb.NodeRecord, runtime string) string {
	for _, m := range rec.GetRuntimeMeters() {
		if name, meter, ok := strings.Cut(m, "="); ok && name == runtime {
			return meter
		}
	}
	return ""
}
