package fsm

import (
	"fmt"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// DefaultRuntimeAdapter runs a session when its placement names none.
const DefaultRuntimeAdapter = "echo"

// ExternalRuntime is the runtime of a session bound by `fak guard`: its
// agent is the provider process of a guarded launch on the user's
// machine, not anything a node runs. Its placement names the launch and
// the host and no node; no runner answers it, and the fleet refuses what
// only a runtime of its own could do (input, interrupt, a move) with
// EXTERNAL_RUNTIME.
const ExternalRuntime = "external"

// IsExternal reports whether p is the external runtime.
func IsExternal(p *fsmpb.Placement) bool { return p.GetRuntimeAdapter() == ExternalRuntime }

// externalWhere says where an external session's agent runs: "claude runs
// on host laptop-7 (launch lch_1)".
func externalWhere(p *fsmpb.Placement) string {
	who := p.GetProvider()
	if who == "" {
		who = "the agent"
	}
	where := "outside the fleet"
	if p.GetHost() != "" {
		where = "on host " + p.GetHost()
	}
	return who + " runs " + where + " (launch " + p.GetLaunchId() + ")"
}

// refuseExternal is the refusal of what only a runtime of the fleet could
// do (what names it: "input", "an interrupt", "a move").
func refuseExternal(s *fsmpb.Session, what string) *Error {
	if !IsExternal(s.Placement) {
		return nil
	}
	return errorf(ReasonExternalRuntime, "session %s is external: %s; the fleet cannot take %s for it", s.SessionId, externalWhere(s.Placement), what)
}

// MaxPlacementFieldBytes bounds each member of a placement tuple.
const MaxPlacementFieldBytes = 128

// The epoch rule (DESIGN.md §7, §8). An epoch is one execution of a
// session on one placement; its number only grows (NextEpoch), even past
// restores that never cut over. Whatever writes for an epoch (a client's
// input, the runner's events, a move's checkpoint) names it and is
// refused with STALE_EPOCH once the session has moved on: the fence that
// keeps an old runner, or a client's stale view, from writing into the
// epoch that replaced it. Every STALE_EPOCH the FSM gives comes from here.

// NextEpoch is the number the session's next execution epoch gets: above
// every number issued before, including restores that never cut over.
func NextEpoch(s *fsmpb.Session) uint64 { return max(s.Epoch, s.MaxEpoch) + 1 }

// bumpEpoch makes the next epoch current (fresh, resume).
func bumpEpoch(s *fsmpb.Session) {
	s.Epoch = NextEpoch(s)
	s.MaxEpoch = s.Epoch
}

// checkEpoch is the epoch fence: a write made for epoch expected is
// refused unless expected is the session's current epoch. what names the
// writer: "runner of" gives "runner of epoch 3; the session's current
// epoch is 4".
func checkEpoch(s *fsmpb.Session, expected uint64, what string) *Error {
	if expected != s.Epoch {
		return errorf(ReasonStaleEpoch, "%s epoch %d; the session's current epoch is %d", what, expected, s.Epoch)
	}
	return nil
}

// checkNextEpoch: a move's destination restores as the session's next
// epoch, the number no epoch has had.
func checkNextEpoch(s *fsmpb.Session, newEpoch uint64) *Error {
	if next := NextEpoch(s); newEpoch != next {
		return errorf(ReasonStaleEpoch, "restore as epoch %d; the next epoch is %d", newEpoch, next)
	}
	return nil
}

// checkAboveEpoch: a restored epoch becomes current (cutover) only while
// it is above the current one.
func checkAboveEpoch(s *fsmpb.Session, restored uint64) *Error {
	if restored <= s.Epoch {
		return errorf(ReasonStaleEpoch, "restored epoch %d is not above the current epoch %d", restored, s.Epoch)
	}
	return nil
}

// validPlacement checks a placement's fields; the launch and host belong
// to the external runtime alone, which needs its launch and names no node.
func validPlacement(p *fsmpb.Placement) *Error {
	fields := [...]struct{ name, v string }{
		{"runtime adapter", p.RuntimeAdapter}, {"provider", p.Provider}, {"account ref", p.AccountRef},
		{"model", p.Model}, {"node", p.Node}, {"launch id", p.LaunchId}, {"host", p.Host},
	}
	for _, f := range fields {
		if len(f.v) > MaxPlacementFieldBytes {
			return errorf(ReasonInvalidArgument, "placement %s longer than %d bytes", f.name, MaxPlacementFieldBytes)
		}
	}
	switch {
	case IsExternal(p) && (p.LaunchId == "" || p.Node != ""):
		return errorf(ReasonInvalidArgument, "the %s runtime names its launch and no node (fak guard binds it)", ExternalRuntime)
	case !IsExternal(p) && (p.LaunchId != "" || p.Host != ""):
		return errorf(ReasonInvalidArgument, "a launch id and host belong to the %s runtime only", ExternalRuntime)
	}
	return nil
}

func epochText(epoch uint64, p *fsmpb.Placement) string {
	if IsExternal(p) {
		return fmt.Sprintf("epoch %d: %s: %s", epoch, ExternalRuntime, externalWhere(p))
	}
	s := fmt.Sprintf("epoch %d: %s", epoch, p.RuntimeAdapter)
	if p.Model != "" {
		s += " " + p.Model
	}
	if p.Node != "" {
		s += " on " + p.Node
	}
	return s
}
