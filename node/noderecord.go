package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/api"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Node records (DESIGN.md §8). Each node advertises what it offers to host
// execution epochs in its gossip metadata (cluster.Capabilities); the
// leader commits every alive member's offer as its FSM node record
// (RegisterNode) whenever the record differs, so admission decisions read
// one replicated record per node. The draining flag belongs to the record
// alone (SetDraining), never to gossip.

// Limits the FSM puts on a node record.
const (
	maxLabels    = 64
	maxCapsEntry = 256
)

// checkCapabilities validates the configured capabilities and that they fit
// in gossip metadata.
func (c *Config) checkCapabilities() error {
	if len(c.Labels) > maxLabels {
		return fmt.Errorf("at most %d --label", maxLabels)
	}
	for k, v := range c.Labels {
		if k == "" || len(k) > fsm.MaxPlacementFieldBytes || len(v) > fsm.MaxPlacementFieldBytes {
			return fmt.Errorf("--label %q=%q: key of 1-%d bytes, value of at most %d", k, v, fsm.MaxPlacementFieldBytes, fsm.MaxPlacementFieldBytes)
		}
	}
	for flag, list := range map[string][]string{"--provider": c.Providers, "--model": c.Models, "--account-ref": c.AccountRefs} {
		if len(list) > maxCapsEntry {
			return fmt.Errorf("at most %d %s", maxCapsEntry, flag)
		}
		for _, v := range list {
			if v == "" || len(v) > fsm.MaxPlacementFieldBytes {
				return fmt.Errorf("%s %q: want 1-%d bytes", flag, v, fsm.MaxPlacementFieldBytes)
			}
		}
	}
	return cluster.CheckCapabilities(c.capabilities(c.runtimeNames()))
}

// capabilities is the node's gossip offer; adapters are the runner's.
func (c *Config) capabilities(adapters []string) cluster.Capabilities {
	// The runtime blocks add what they run: a model runtime's model, and
	// the accounts this node resolves.
	models, accounts := slices.Clone(c.Models), slices.Clone(c.AccountRefs)
	for _, r := range c.Runtimes {
		if r.Model != "" {
			models = append(models, r.Model)
		}
	}
	for _, a := range c.Accounts {
		accounts = append(accounts, a.Name)
	}
	caps := cluster.Capabilities{
		Adapters: sortedSet(adapters), Providers: sortedSet(c.Providers), Models: sortedSet(models),
		AccountRefs: sortedSet(accounts), Capacity: c.Capacity, Approvals: c.runtimeApprovals(),
		Meters:      c.runtimeMeters(),
		RuleVersion: fsm.RuleVersion,
	}
	if len(c.Labels) > 0 {
		caps.Labels = maps.Clone(c.Labels)
	}
	return caps
}

func sortedSet(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// recordOf is the node record a member's gossip metadata asks for (nil when
// it advertises no capabilities). Labels are sorted by key, as the FSM
// requires.
func recordOf(m cluster.Member) *fsmpb.NodeRecord {
	caps := m.Meta.Caps
	if caps == nil {
		return nil
	}
	rec := &fsmpb.NodeRecord{
		Name: m.Name, ApiAddr: m.Meta.APIAddr, RaftAddr: m.Meta.RaftAddr,
		RuntimeAdapters: caps.Adapters, Providers: caps.Providers, Models: caps.Models,
		AccountRefs: caps.AccountRefs, Capacity: caps.Capacity, RuntimeApprovals: caps.Approvals, RuntimeMeters: caps.Meters,
		RuleVersion: caps.RuleVersion,
	}
	for k, v := range caps.Labels {
		rec.Labels = append(rec.Labels, &fsmpb.Label{Key: k, Value: v})
	}
	sort.Slice(rec.Labels, func(i, j int) bool { return rec.Labels[i].Key < rec.Labels[j].Key })
	return rec
}

// sameOffer compares two records on what gossip advertises (not the
// draining flag, not the commit time).
func sameOffer(a, b *fsmpb.NodeRecord) bool {
	x, y := proto.Clone(a).(*fsmpb.NodeRecord), proto.Clone(b).(*fsmpb.NodeRecord)
	x.Draining, y.Draining = false, false
	x.UpdatedUnixNano, y.UpdatedUnixNano = 0, 0
	return proto.Equal(x, y)
}

// registerNodes (leader) commits the record of every alive member whose
// offer differs from its committed record. It reports whether it
// registered any.
func (n *Node) registerNodes(ctx context.Context, members []cluster.Member, recs []*fsmpb.NodeRecord) bool {
	have := make(map[string]*fsmpb.NodeRecord, len(recs))
	for _, r := range recs {
		have[r.Name] = r
	}
	registered := false
	for _, m := range members {
		if m.Status != cluster.StatusAlive {
			continue
		}
		want := recordOf(m)
		if want == nil {
			continue
		}
		if old := have[m.Name]; old != nil && sameOffer(old, want) {
			continue
		}
		err := n.applyMoveCommand(ctx, api.NewID("node_"), &fsmpb.Command{Body: &fsmpb.Command_RegisterNode{RegisterNode: &fsmpb.RegisterNode{Node: want}}})
		if err != nil {
			n.logger.Warn("registering node record", "node", m.Name, "error", err)
			continue
		}
		n.logger.Info("node record registered", "node", m.Name, "adapters", want.RuntimeAdapters, "capacity", want.Capacity)
		registered = true
	}
	return registered
}
