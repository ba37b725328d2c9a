package fsm

import (
	"fmt"
	"strings"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Rule versions. Every command carries the version of the rules it needs
// (Command.rule_version, stamped by the leader from CommandRuleVersion).
// A build applies every version up to RuleVersion; a command that needs a
// later one, or whose body this build does not know (a command type added
// since), is never skipped: the FSM stops applying at that entry and says
// why (Halted), and everything it applied stays as it was. The node
// carries on once it runs a build that knows those rules: its database is
// kept at the last entry it applied, and Raft replays the rest.
//
// A change to what an existing command does raises RuleVersion and the
// version CommandRuleVersion gives that command, so that the leader
// proposes it only once every voter's build applies it.

// RuleVersion is the highest rule version this build applies. Version 2
// adds no command: a build of version 2 restores compressed snapshots
// (SnapshotCompressionRules), so a fleet whose voters all advertise it
// writes them. Version 3 is BudgetStartRules.
const RuleVersion uint32 = 3

// BudgetStartRules (issue 32): a charge that starts a call (a query or a
// turn; RecordUsage, RunnerAppend) is refused once any axis is used up
// (MayStart), and RecordUsage.unmetered journals a gateway's late charge,
// even on a session stopped since. A command stamped below it applies the
// rules before (the charged axes alone; no unmetered), so a fleet halfway
// through a rolling upgrade stays deterministic: the leader stamps it
// only once every voter applies it (PreferredRuleVersion), and until then
// proposes the command at version 1 rather than refusing it.
const BudgetStartRules uint32 = 3

// CommandRuleVersion is the rule version c needs. Every command type of
// this build needs version 1: a command whose rules changed since can
// still be applied by the rules before (PreferredRuleVersion).
func CommandRuleVersion(c *fsmpb.Command) uint32 {
	return 1
}

// PreferredRuleVersion is the version the leader stamps on c when every
// voter's build applies it (else CommandRuleVersion): the newest rules of
// a command that still applies by older ones.
func PreferredRuleVersion(c *fsmpb.Command) uint32 {
	switch c.Body.(type) {
	case *fsmpb.Command_RecordUsage, *fsmpb.Command_RunnerAppend:
		return BudgetStartRules
	}
	return CommandRuleVersion(c)
}

// ReasonRulesUnknown is the error of every entry a halted FSM meets.
const ReasonRulesUnknown Reason = "RULES_UNKNOWN"

// ReasonUpgradeInProgress refuses a command that needs a rule version some
// voter's build does not apply yet.
const ReasonUpgradeInProgress Reason = "UPGRADE_IN_PROGRESS"

// UpgradeBlockers names the voters (by Raft server id, which is the node
// name) whose build applies only rule versions below need, as their node
// records say; a voter without a record, or whose record predates
// advertised versions, applies version 1. The leader proposes a command
// of version need only when there are none (Nomad's and Consul's gate on
// the servers' minimum version).
func UpgradeBlockers(need uint32, voters []string, recs []*fsmpb.NodeRecord) []string {
	if need <= 1 {
		return nil // every build applies version 1
	}
	have := make(map[string]uint32, len(recs))
	for _, r := range recs {
		have[r.Name] = r.RuleVersion
	}
	var old []string
	for _, v := range voters {
		if got := max(have[v], 1); got < need {
			old = append(old, fmt.Sprintf("%s (rule version %d)", v, got))
		}
	}
	return old
}

// UpgradeInProgress is the refusal of a command of rule version need while
// the blockers run older builds.
func UpgradeInProgress(need uint32, blockers []string) *Error {
	return errorf(ReasonUpgradeInProgress, "this needs rule version %d, which voters %s do not apply yet: upgrade them first",
		need, strings.Join(blockers, ", "))
}

// HaltError is why an FSM stopped applying: the entry at Index needs rules
// this build does not have.
type HaltError struct {
	Index uint64
	// Needs is the rule version the entry needs (0: a command type this
	// build does not know).
	Needs uint32
}

func (h *HaltError) Error() string {
	if h.Needs == 0 {
		return fmt.Sprintf("raft entry %d holds a command of a type this build does not know: it was written by a newer fak; upgrade this node", h.Index)
	}
	return fmt.Sprintf("raft entry %d needs rule version %d; this build applies up to %d: upgrade this node", h.Index, h.Needs, RuleVersion)
}

// unknownRules reports whether cmds hold a command this build cannot
// apply, and the version it needs (0: an unknown command type).
func unknownRules(cmds []*fsmpb.Command) (needs uint32, unknown bool) {
	for _, c := range cmds {
		if c.RuleVersion > RuleVersion {
			return c.RuleVersion, true
		}
		// A body of a type added since this build decodes as no body with
		// unknown fields; no body and no unknown fields is merely
		// malformed (INVALID_ARGUMENT, as ever).
		if c.Body == nil && len(c.ProtoReflect().GetUnknown()) > 0 {
			return 0, true
		}
	}
	return 0, false
}

// Halted is why this FSM stopped applying (nil: it has not).
func (f *FSM) Halted() *HaltError { return f.halted.Load() }
