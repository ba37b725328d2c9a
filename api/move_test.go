package api

import (
	"net/http"
	"strings"
	"testing"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

func control(cs *fakv1.CapabilitySet, name string) *fakv1.Control {
	for _, c := range cs.GetControls() {
		if c.GetName() == name {
			return c
		}
	}
	return nil
}

// TestSessionMoveControl: session.move is available on an active session
// without an open move (also after one finished), BUSY while one is open,
// SESSION_STOPPED on a stopped session.
func TestSessionMoveControl(t *testing.T) {
	active := fsmpb.SessionState_SESSION_STATE_ACTIVE
	tests := []struct {
		name      string
		s         *fsmpb.Session
		available bool
		reason    string
		message   string
	}{
		{"no move yet", &fsmpb.Session{SessionId: "s", State: active}, true, "", ""},
		{"a finished move", &fsmpb.Session{SessionId: "s", State: active, Move: &fsmpb.Move{MoveId: "mov_1", State: fsm.MoveCutoverCommitted}}, true, "", ""},
		{"a failed move", &fsmpb.Session{SessionId: "s", State: active, Move: &fsmpb.Move{MoveId: "mov_1", State: fsm.MoveUnsafe}}, true, "", ""},
		{"an open move", &fsmpb.Session{SessionId: "s", State: active, Move: &fsmpb.Move{MoveId: "mov_1", State: fsm.MoveCheckpointed}},
			false, "BUSY", "move mov_1 is in progress (CHECKPOINTED)"},
		{"stopped", &fsmpb.Session{SessionId: "s", State: fsmpb.SessionState_SESSION_STATE_STOPPED, StopReason: "done"},
			false, "SESSION_STOPPED", "the session is stopped (done)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := capabilitiesToAPI(fsm.Capabilities(tt.s, nil, fsm.RoleOperator, 0))
			if cs.GetVersion() != fsm.CapabilityVersion || fsm.CapabilityVersion < 3 {
				t.Errorf("capability set v%d (CapabilityVersion %d); session.move came with v3", cs.GetVersion(), fsm.CapabilityVersion)
			}
			c := control(cs, fsm.ControlSessionMove)
			if c == nil {
				t.Fatalf("no %s control in %v", fsm.ControlSessionMove, cs)
			}
			if c.GetAvailable() != tt.available || c.GetReason() != tt.reason || c.GetMessage() != tt.message {
				t.Errorf("%s: available %v reason %q message %q; want %v %q %q", fsm.ControlSessionMove,
					c.GetAvailable(), c.GetReason(), c.GetMessage(), tt.available, tt.reason, tt.message)
			}
			if tt.reason == "BUSY" && c.GetHandoff() != "fakctl session move-status s" {
				t.Errorf("handoff %q", c.GetHandoff())
			}
		})
	}
}

// TestMoveIDFor: a node draws a time-ordered move id; the leader keeps the
// one a forwarded request carries, and only then.
func TestMoveIDFor(t *testing.T) {
	a, b := moveIDFor(http.Header{}), moveIDFor(http.Header{})
	if !strings.HasPrefix(a, "mov_") || len(a) != len("mov_")+28 || a == b {
		t.Fatalf("drawn ids %q %q", a, b)
	}
	fwd := http.Header{}
	fwd.Set(headerForwarded, "n2")
	fwd.Set(headerMoveID, "mov_0123")
	if got := moveIDFor(fwd); got != "mov_0123" {
		t.Errorf("forwarded: %q, want the carried id", got)
	}
	direct := http.Header{}
	direct.Set(headerMoveID, "mov_0123")
	if got := moveIDFor(direct); got == "mov_0123" {
		t.Errorf("a client's header was taken as the move id")
	}
	fwd.Set(headerMoveID, "ses_x")
	if got := moveIDFor(fwd); got == "ses_x" || !strings.HasPrefix(got, "mov_") {
		t.Errorf("a malformed carried id was kept: %q", got)
	}
}
