package fsm

import (
	"slices"

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
	for _, list := range [][]string{n.RuntimeAdapters, n.Providers, n.Models, n.AccountRefs} {
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
