package fsm

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// capNow is the time leases are judged at in the capability tests.
const capNow int64 = 1_000

// capSession is an active session s1 with no lease, approval, turn or move;
// each option changes one thing.
func capSession(opts ...func(*fsmpb.Session)) *fsmpb.Session {
	s := &fsmpb.Session{SessionId: "s1", State: fsmpb.SessionState_SESSION_STATE_ACTIVE, Epoch: 1}
	for _, o := range opts {
		o(s)
	}
	return s
}

func capLeaseOf(attachmentID, kind, name string, expires int64) func(*fsmpb.Session) {
	return func(s *fsmpb.Session) {
		s.Lease = &fsmpb.Lease{AttachmentId: attachmentID, ClientKind: kind, ClientName: name, ExpiresUnixNano: expires}
	}
}

var (
	capHeldByMe         = capLeaseOf("a1", "terminal", "laptop", capNow+1)
	capHeldByOther      = capLeaseOf("a2", "web", "phone", capNow+1)
	capMyLeaseGone      = capLeaseOf("a1", "terminal", "laptop", capNow)
	capOtherLeaseGone   = capLeaseOf("a2", "web", "phone", capNow-1)
	capApprovalPending  = func(s *fsmpb.Session) { s.PendingApprovalSeq = 7 }
	capApprovalAnswered = func(s *fsmpb.Session) {
		s.PendingApprovalSeq = 7
		s.Approval = &fsmpb.Approval{ApprovalSeq: 7, Answered: true, Approved: true}
	}
	capTurnInFlight = func(s *fsmpb.Session) { s.TurnInputSeq = 4 }
	capMoveOpen     = func(s *fsmpb.Session) { s.Move = &fsmpb.Move{MoveId: "mov_1", State: MoveCheckpointed} }
	capMoveEnded    = func(s *fsmpb.Session) { s.Move = &fsmpb.Move{MoveId: "mov_1", State: MoveCutoverCommitted} }
	capStopped      = func(s *fsmpb.Session) {
		s.State = fsmpb.SessionState_SESSION_STATE_STOPPED
		s.StopReason = "done"
	}
	// capExternal: a guarded launch's session, served on laptop-7.
	capExternal = func(s *fsmpb.Session) {
		s.Placement = &fsmpb.Placement{RuntimeAdapter: ExternalRuntime, Provider: "claude", LaunchId: "lch_1", Host: "laptop-7"}
	}
)

// capMe is the caller's attachment in the capability tests.
var capMe = &fsmpb.Attachment{SessionId: "s1", AttachmentId: "a1", ClientKind: "terminal", ClientName: "laptop"}

// renderCaps prints a capability set one control a line, as clients get
// it on the wire:
//
//	control  on
//	control  REASON "message" -> handoff
func renderCaps(cs []Capability) string {
	var b strings.Builder
	for _, c := range cs {
		if c.Available {
			fmt.Fprintf(&b, "%-15s on\n", c.Control)
			continue
		}
		fmt.Fprintf(&b, "%-15s %s %q", c.Control, c.Reason, c.Message)
		if c.Handoff != "" {
			fmt.Fprintf(&b, " -> %s", c.Handoff)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestCapabilities is the capability set, every control in every state
// that changes one: available, or unavailable with its reason, message
// and handoff. Clients and the browser page read these strings; a change
// here is a change of the wire (and of CapabilityVersion).
func TestCapabilities(t *testing.T) {
	tests := []struct {
		name string
		s    *fsmpb.Session
		at   *fsmpb.Attachment // the caller's attachment; nil: an observer
		want string
		role Role // the caller's token role; "": operator
	}{
		{
			// An observer (no attachment) may stop, fork, reset and move the session, nothing that needs an attachment.
			"observer", capSession(), nil, `
input.text      NOT_ATTACHED "attach to the session first" -> attach
turn.interrupt  NOT_ATTACHED "attach to the session first" -> attach
lease.take      NOT_ATTACHED "attach to the session first" -> attach
lease.release   NOT_ATTACHED "attach to the session first" -> attach
lease.steal     NOT_ATTACHED "attach to the session first" -> attach
approval.answer NOT_ATTACHED "attach to the session first" -> attach
session.stop    on
session.fresh   on
session.reset   on
session.clear   on
session.new     on
session.fork    on
session.move    on
detach          NOT_ATTACHED "attach to the session first" -> attach
`, "",
		},
		{
			// A lease held by someone does not change what an observer sees.
			"observer, lease held", capSession(capHeldByOther), nil, `
input.text      NOT_ATTACHED "attach to the session first" -> attach
turn.interrupt  NOT_ATTACHED "attach to the session first" -> attach
lease.take      NOT_ATTACHED "attach to the session first" -> attach
lease.release   NOT_ATTACHED "attach to the session first" -> attach
lease.steal     NOT_ATTACHED "attach to the session first" -> attach
approval.answer NOT_ATTACHED "attach to the session first" -> attach
session.stop    on
session.fresh   on
session.reset   on
session.clear   on
session.new     on
session.fork    on
session.move    on
detach          NOT_ATTACHED "attach to the session first" -> attach
`, "",
		},
		{
			// Attached with the lease free: take it before typing.
			"attached, lease free", capSession(), capMe, `
input.text      LEASE_NOT_HELD "take the input lease first" -> lease.take
turn.interrupt  LEASE_NOT_HELD "take the input lease first" -> lease.take
lease.take      on
lease.release   LEASE_NOT_HELD "this attachment does not hold the lease" -> lease.take
lease.steal     NOT_HELD_BY_OTHER "no other attachment holds the lease" -> lease.take
approval.answer NO_PENDING_APPROVAL "no approval is pending"
session.stop    on
session.fresh   on
session.reset   on
session.clear   on
session.new     on
session.fork    on
session.move    on
detach          on
`, "",
		},
		{
			// The holder types and may release; taking it again is ALREADY_HELD.
			"attached, holds lease", capSession(capHeldByMe), capMe, `
input.text      on
turn.interrupt  NO_TURN_RUNNING "no turn is running"
lease.take      ALREADY_HELD "this attachment holds the lease" -> lease.release
lease.release   on
lease.steal     NOT_HELD_BY_OTHER "no other attachment holds the lease" -> lease.take
approval.answer NO_PENDING_APPROVAL "no approval is pending"
session.stop    on
session.fresh   on
session.reset   on
session.clear   on
session.new     on
session.fork    on
session.move    on
detach          on
`, "",
		},
		{
			// Another attachment holds the lease: typing and taking hand off to steal.
			"attached, other holds", capSession(capHeldByOther), capMe, `
input.text      LEASE_NOT_HELD "the input lease is held by web phone" -> lease.steal
turn.interrupt  LEASE_NOT_HELD "the input lease is held by web phone" -> lease.steal
lease.take      LEASE_HELD "the input lease is held by web phone" -> lease.steal
lease.release   LEASE_NOT_HELD "this attachment does not hold the lease" -> lease.take
lease.steal     on
approval.answer NO_PENDING_APPROVAL "no approval is pending"
session.stop    on
session.fresh   on
session.reset   on
session.clear   on
session.new     on
session.fork    on
session.move    on
detach          on
`, "",
		},
		{
			// An expired lease of the caller's is no lease (expiry is exclusive).
			"attached, own lease expired", capSession(capMyLeaseGone), capMe, `
input.text      LEASE_NOT_HELD "take the input lease first" -> lease.take
turn.interrupt  LEASE_NOT_HELD "take the input lease first" -> lease.take
lease.take      on
lease.release   LEASE_NOT_HELD "this attachment does not hold the lease" -> lease.take
lease.steal     NOT_HELD_BY_OTHER "no other attachment holds the lease" -> lease.take
approval.answer NO_PENDING_APPROVAL "no approval is pending"
session.stop    on
session.fresh   on
session.reset   on
session.clear   on
session.new     on
session.fork    on
session.move    on
detach          on
`, "",
		},
		{
			// An expired lease of another's is no lease: nothing to steal.
			"attached, other's lease expired", capSession(capOtherLeaseGone), capMe, `
input.text      LEASE_NOT_HELD "take the input lease first" -> lease.take
turn.interrupt  LEASE_NOT_HELD "take the input lease first" -> lease.take
lease.take      on
lease.release   LEASE_NOT_HELD "this attachment does not hold the lease" -> lease.take
lease.steal     NOT_HELD_BY_OTHER "no other attachment holds the lease" -> lease.take
approval.answer NO_PENDING_APPROVAL "no approval is pending"
session.stop    on
session.fresh   on
session.reset   on
session.clear   on
session.new     on
session.fork    on
session.move    on
detach          on
`, "",
		},
		{
			// A pending approval may be answered by any attachment, without the lease.
			"approval pending", capSession(capApprovalPending), capMe, `
input.text      LEASE_NOT_HELD "take the input lease first" -> lease.take
turn.interrupt  LEASE_NOT_HELD "take the input lease first" -> lease.take
lease.take      on
lease.release   LEASE_NOT_HELD "this attachment does not hold the lease" -> lease.take
lease.steal     NOT_HELD_BY_OTHER "no other attachment holds the lease" -> lease.take
approval.answer on
session.stop    on
session.fresh   on
session.reset   on
session.clear   on
session.new     on
session.fork    on
session.move    on
detach          on
`, "",
		},
		{
			// An answered approval is no longer pending.
			"approval answered", capSession(capApprovalAnswered), capMe, `
input.text      LEASE_NOT_HELD "take the input lease first" -> lease.take
turn.interrupt  LEASE_NOT_HELD "take the input lease first" -> lease.take
lease.take      on
lease.release   LEASE_NOT_HELD "this attachment does not hold the lease" -> lease.take
lease.steal     NOT_HELD_BY_OTHER "no other attachment holds the lease" -> lease.take
approval.answer NO_PENDING_APPROVAL "no approval is pending"
session.stop    on
session.fresh   on
session.reset   on
session.clear   on
session.new     on
session.fork    on
session.move    on
detach          on
`, "",
		},
		{
			// A turn in flight makes reset BUSY, nothing else.
			"turn in flight", capSession(capTurnInFlight), capMe, `
input.text      LEASE_NOT_HELD "take the input lease first" -> lease.take
turn.interrupt  LEASE_NOT_HELD "take the input lease first" -> lease.take
lease.take      on
lease.release   LEASE_NOT_HELD "this attachment does not hold the lease" -> lease.take
lease.steal     NOT_HELD_BY_OTHER "no other attachment holds the lease" -> lease.take
approval.answer NO_PENDING_APPROVAL "no approval is pending"
session.stop    on
session.fresh   on
session.reset   BUSY "a turn is in flight; reset when it completes"
session.clear   on
session.new     on
session.fork    on
session.move    on
detach          on
`, "",
		},
		{
			// The holder may interrupt the turn in flight.
			"holds lease, turn in flight", capSession(capHeldByMe, capTurnInFlight), capMe, `
input.text      on
turn.interrupt  on
lease.take      ALREADY_HELD "this attachment holds the lease" -> lease.release
lease.release   on
lease.steal     NOT_HELD_BY_OTHER "no other attachment holds the lease" -> lease.take
approval.answer NO_PENDING_APPROVAL "no approval is pending"
session.stop    on
session.fresh   on
session.reset   BUSY "a turn is in flight; reset when it completes"
session.clear   on
session.new     on
session.fork    on
session.move    on
detach          on
`, "",
		},
		{
			// An external session (fak guard): its agent runs on the user's machine, so
			// the fleet cannot send it input, interrupt or move it, lease or not; the
			// handoff names the launch. The ledger and the lease still work.
			"external, holds lease", capSession(capExternal, capHeldByMe), capMe, `
input.text      EXTERNAL_RUNTIME "claude runs on host laptop-7 (launch lch_1); the fleet does not run it" -> fakctl launch describe lch_1
turn.interrupt  EXTERNAL_RUNTIME "claude runs on host laptop-7 (launch lch_1); the fleet does not run it" -> fakctl launch describe lch_1
lease.take      ALREADY_HELD "this attachment holds the lease" -> lease.release
lease.release   on
lease.steal     NOT_HELD_BY_OTHER "no other attachment holds the lease" -> lease.take
approval.answer NO_PENDING_APPROVAL "no approval is pending"
session.stop    on
session.fresh   on
session.reset   on
session.clear   on
session.new     on
session.fork    on
session.move    EXTERNAL_RUNTIME "claude runs on host laptop-7 (launch lch_1); the fleet does not run it" -> fakctl launch describe lch_1
detach          on
`, "",
		},
		{
			// A stopped external session says it is stopped first.
			"external, stopped", capSession(capExternal, capStopped), nil, `
input.text      SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
turn.interrupt  SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
lease.take      SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
lease.release   NOT_ATTACHED "attach to the session first" -> attach
lease.steal     SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
approval.answer NOT_ATTACHED "attach to the session first" -> attach
session.stop    SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
session.fresh   SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
session.reset   SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
session.clear   SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
session.new     SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
session.fork    on
session.move    SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
detach          NOT_ATTACHED "attach to the session first" -> attach
`, "",
		},
		{
			// A read token observes: every control is its role's refusal, before any
			// other (the API refuses the call first).
			"read token", capSession(capHeldByOther, capTurnInFlight), nil, `
input.text      PERMISSION_DENIED "a read token cannot send input (the agent role can)"
turn.interrupt  PERMISSION_DENIED "a read token cannot interrupt a turn (the agent role can)"
lease.take      PERMISSION_DENIED "a read token cannot take the input lease (the agent role can)"
lease.release   PERMISSION_DENIED "a read token cannot release the input lease (the agent role can)"
lease.steal     PERMISSION_DENIED "a read token cannot steal the input lease (the agent role can)"
approval.answer PERMISSION_DENIED "a read token cannot answer an approval (the agent role can)"
session.stop    PERMISSION_DENIED "a read token cannot stop the session (the agent role can)"
session.fresh   PERMISSION_DENIED "a read token cannot renew the provider binding (the agent role can)"
session.reset   PERMISSION_DENIED "a read token cannot reset the session (the agent role can)"
session.clear   PERMISSION_DENIED "a read token cannot clear the session (the agent role can)"
session.new     PERMISSION_DENIED "a read token cannot start a new session (the agent role can)"
session.fork    PERMISSION_DENIED "a read token cannot fork the session (the agent role can)"
session.move    PERMISSION_DENIED "a read token cannot move the session (the operator role can)"
detach          PERMISSION_DENIED "a read token cannot detach (the agent role can)"
`, RoleRead,
		},
		{
			// An agent token does all but move, which needs an operator.
			"agent token, holds lease, turn in flight", capSession(capHeldByMe, capTurnInFlight), capMe, `
input.text      on
turn.interrupt  on
lease.take      ALREADY_HELD "this attachment holds the lease" -> lease.release
lease.release   on
lease.steal     NOT_HELD_BY_OTHER "no other attachment holds the lease" -> lease.take
approval.answer NO_PENDING_APPROVAL "no approval is pending"
session.stop    on
session.fresh   on
session.reset   BUSY "a turn is in flight; reset when it completes"
session.clear   on
session.new     on
session.fork    on
session.move    PERMISSION_DENIED "an agent token cannot move the session (the operator role can)"
detach          on
`, RoleAgent,
		},
		{
			// One move at a time: an open move makes session.move BUSY, handing off to move-status.
			"move open", capSession(capMoveOpen), capMe, `
input.text      LEASE_NOT_HELD "take the input lease first" -> lease.take
turn.interrupt  LEASE_NOT_HELD "take the input lease first" -> lease.take
lease.take      on
lease.release   LEASE_NOT_HELD "this attachment does not hold the lease" -> lease.take
lease.steal     NOT_HELD_BY_OTHER "no other attachment holds the lease" -> lease.take
approval.answer NO_PENDING_APPROVAL "no approval is pending"
session.stop    on
session.fresh   on
session.reset   on
session.clear   on
session.new     on
session.fork    on
session.move    BUSY "move mov_1 is in progress (CHECKPOINTED)" -> fakctl session move-status s1
detach          on
`, "",
		},
		{
			// A finished move does not block the next.
			"move ended", capSession(capMoveEnded), capMe, `
input.text      LEASE_NOT_HELD "take the input lease first" -> lease.take
turn.interrupt  LEASE_NOT_HELD "take the input lease first" -> lease.take
lease.take      on
lease.release   LEASE_NOT_HELD "this attachment does not hold the lease" -> lease.take
lease.steal     NOT_HELD_BY_OTHER "no other attachment holds the lease" -> lease.take
approval.answer NO_PENDING_APPROVAL "no approval is pending"
session.stop    on
session.fresh   on
session.reset   on
session.clear   on
session.new     on
session.fork    on
session.move    on
detach          on
`, "",
		},
		{
			// A stopped session: fork, detach and lease.release keep their own
			// rules; the rest is SESSION_STOPPED, a pending approval's answer
			// too (the command refuses it).
			"stopped, holds lease, approval pending", capSession(capStopped, capHeldByMe, capApprovalPending), capMe, `
input.text      SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
turn.interrupt  SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
lease.take      SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
lease.release   on
lease.steal     SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
approval.answer SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
session.stop    SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
session.fresh   SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
session.reset   SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
session.clear   SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
session.new     SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
session.fork    on
session.move    SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
detach          on
`, "",
		},
		{
			// A stopped session, seen by an observer.
			"stopped observer", capSession(capStopped), nil, `
input.text      SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
turn.interrupt  SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
lease.take      SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
lease.release   NOT_ATTACHED "attach to the session first" -> attach
lease.steal     SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
approval.answer NOT_ATTACHED "attach to the session first" -> attach
session.stop    SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
session.fresh   SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
session.reset   SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
session.clear   SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
session.new     SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
session.fork    on
session.move    SESSION_STOPPED "the session is stopped (done)" -> fakctl session describe s1
detach          NOT_ATTACHED "attach to the session first" -> attach
`, "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			role := tt.role
			if role == "" {
				role = RoleOperator
			}
			if got := renderCaps(Capabilities(tt.s, tt.at, role, capNow)); got != tt.want[1:] {
				t.Errorf("capability set:\n%s\nwant:\n%s", got, tt.want[1:])
			}
		})
	}
}

// capControls is every control, in the order the set lists them.
var capControls = []string{
	ControlInputText, ControlTurnInterrupt, ControlLeaseTake, ControlLeaseRelease, ControlLeaseSteal, ControlApprovalAnswer,
	ControlSessionStop, ControlSessionFresh, ControlSessionReset, ControlSessionClear, ControlSessionNew,
	ControlSessionFork, ControlSessionMove, ControlDetach,
}

// TestCapabilitiesShape sweeps every combination of the states above, on
// a runtime of the fleet and an external one, for every role, and checks
// what holds in each: every control exactly once, in a fixed order
// (Controls); an available control carries no reason, message or handoff;
// an unavailable one a reason and a message, and a handoff (if any) that
// is a control, "attach" or a fakctl command; a control the role may not
// use is PERMISSION_DENIED, and every other control is what the operator
// sees. An attachment record with the caller's id counts, whatever else it
// holds; the caller is judged by the lease at the given time only.
func TestCapabilitiesShape(t *testing.T) {
	if !slices.Equal(Controls(), capControls) {
		t.Fatalf("Controls() = %v, want %v", Controls(), capControls)
	}
	leases := []func(*fsmpb.Session){func(*fsmpb.Session) {}, capHeldByMe, capHeldByOther, capMyLeaseGone, capOtherLeaseGone}
	others := []func(*fsmpb.Session){func(*fsmpb.Session) {}, capApprovalPending, capApprovalAnswered, capTurnInFlight, capMoveOpen, capMoveEnded}
	runtimes := []func(*fsmpb.Session){func(*fsmpb.Session) {}, capExternal}
	n := 0
	for _, stop := range []bool{false, true} {
		for ri, runtime := range runtimes {
			for li, lease := range leases {
				for oi, other := range others {
					for _, at := range []*fsmpb.Attachment{nil, capMe, {AttachmentId: "a1"}} {
						opts := []func(*fsmpb.Session){runtime, lease, other}
						if stop {
							opts = append(opts, capStopped)
						}
						all := Capabilities(capSession(opts...), at, RoleOperator, capNow)
						for _, role := range []Role{RoleRead, RoleAgent, RoleOperator} {
							cs := Capabilities(capSession(opts...), at, role, capNow)
							n++
							where := fmt.Sprintf("stopped %v, runtime %d, lease %d, state %d, attachment %v, role %s", stop, ri, li, oi, at.GetAttachmentId(), role)
							names := make([]string, len(cs))
							for i, c := range cs {
								names[i] = c.Control
								switch {
								case c.Available && (c.Reason != "" || c.Message != "" || c.Handoff != ""):
									t.Errorf("%s: %s is available with %q %q %q", where, c.Control, c.Reason, c.Message, c.Handoff)
								case !c.Available && (c.Reason == "" || c.Message == ""):
									t.Errorf("%s: %s is unavailable without a reason or message", where, c.Control)
								case c.Handoff != "" && c.Handoff != HandoffAttach && !slices.Contains(capControls, c.Handoff) &&
									!strings.HasPrefix(c.Handoff, "fakctl "):
									t.Errorf("%s: %s hands off to %q", where, c.Control, c.Handoff)
								case !role.Covers(ControlRole(c.Control)) && c.Reason != ReasonPermissionDenied:
									t.Errorf("%s: %s needs %s, but is %v", where, c.Control, ControlRole(c.Control), c)
								case role.Covers(ControlRole(c.Control)) && c != all[i]:
									t.Errorf("%s: %s is %v, the operator's %v", where, c.Control, c, all[i])
								}
							}
							if !slices.Equal(names, capControls) {
								t.Fatalf("%s: controls %v, want %v", where, names, capControls)
							}
							if at != nil {
								if other := Capabilities(capSession(opts...), &fsmpb.Attachment{AttachmentId: at.AttachmentId}, role, capNow); renderCaps(other) != renderCaps(cs) {
									t.Errorf("%s: the set depends on more of the attachment than its id", where)
								}
							}
						}
					}
				}
			}
		}
	}
	if n != 1080 {
		t.Errorf("swept %d combinations", n)
	}
}

// TestControlRoles: moving needs an operator, every other control an
// agent; an unknown control needs a role nobody has.
func TestControlRoles(t *testing.T) {
	for _, c := range Controls() {
		want := Role(RoleAgent)
		if c == ControlSessionMove {
			want = RoleOperator
		}
		if got := ControlRole(c); got != want {
			t.Errorf("%s needs %q, want %q", c, got, want)
		}
	}
	if ControlRole("bogus") != "" || Role("").Covers(RoleRead) || !Role(RoleRead).Covers("") || Role(RoleAgent).Covers(RoleOperator) {
		t.Error("role ranks are off")
	}
}
