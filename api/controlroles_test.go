package api

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/fsm"
)

// controlProcedures is the procedure that acts on each control of the
// capability set, as the reference clients call it.
var controlProcedures = map[string]string{
	fsm.ControlInputText:      fakv1connect.SessionServiceActProcedure,
	fsm.ControlTurnInterrupt:  fakv1connect.SessionServiceActProcedure,
	fsm.ControlLeaseTake:      fakv1connect.SessionServiceTakeLeaseProcedure,
	fsm.ControlLeaseRelease:   fakv1connect.SessionServiceReleaseLeaseProcedure,
	fsm.ControlLeaseSteal:     fakv1connect.SessionServiceTakeLeaseProcedure,
	fsm.ControlApprovalAnswer: fakv1connect.SessionServiceAnswerApprovalProcedure,
	fsm.ControlSessionStop:    fakv1connect.SessionServiceStopSessionProcedure,
	fsm.ControlDetach:         fakv1connect.SessionServiceDetachProcedure,
	fsm.ControlSessionFresh:   fakv1connect.SessionServiceFreshSessionProcedure,
	fsm.ControlSessionReset:   fakv1connect.SessionServiceResetSessionProcedure,
	fsm.ControlSessionClear:   fakv1connect.SessionServiceClearSessionProcedure,
	fsm.ControlSessionNew:     fakv1connect.SessionServiceNewSessionProcedure,
	fsm.ControlSessionFork:    fakv1connect.SessionServiceForkSessionProcedure,
	fsm.ControlSessionMove:    fakv1connect.SessionServiceMoveSessionProcedure,
}

// TestControlRolesMatchProcedures: the role the capability set says a
// control needs (fsm.ControlRole) is the role table's for the procedure
// that acts on it, for every control, so the set never offers what the
// API refuses, nor refuses what it allows.
func TestControlRolesMatchProcedures(t *testing.T) {
	for _, c := range fsm.Controls() {
		proc, ok := controlProcedures[c]
		if !ok {
			t.Errorf("control %s: no procedure acts on it in controlProcedures", c)
			continue
		}
		need, ok := requiredRole(proc)
		if !ok {
			t.Errorf("control %s: procedure %s is not in the role table", c, proc)
			continue
		}
		if got := fsm.ControlRole(c); got != fsmRole(need) {
			t.Errorf("control %s needs %q in fsm, but %s needs %s", c, got, proc, apiclient.RoleName(need))
		}
	}
	for c := range controlProcedures {
		if !slices.Contains(fsm.Controls(), c) {
			t.Errorf("controlProcedures names %s, which is not a control", c)
		}
	}
	for _, r := range []fakv1.Role{RoleRead, RoleAgent, RoleOperator} {
		if string(fsmRole(r)) != apiclient.RoleName(r) {
			t.Errorf("fsmRole(%s) = %q", apiclient.RoleName(r), fsmRole(r))
		}
	}
	if fsmRole(fakv1.Role_ROLE_UNSPECIFIED) != "" {
		t.Error("an unspecified role maps to a role")
	}
}

// TestCallerRoleReachesHandlers: the auth interceptor hands the handler
// the role the call was authorized with — the token's, or operator with
// authentication off — which the descriptor's capability set is judged by.
func TestCallerRoleReachesHandlers(t *testing.T) {
	const path = fakv1connect.SessionServiceDescribeSessionProcedure
	for _, tc := range []struct {
		name   string
		tokens []Token
		token  string
		want   fakv1.Role
	}{
		{"read token", []Token{{Secret: "tok-read", Role: RoleRead}, OperatorToken("tok-op")}, "tok-read", RoleRead},
		{"agent token", []Token{{Secret: "tok-agent", Role: RoleAgent}, OperatorToken("tok-op")}, "tok-agent", RoleAgent},
		{"operator token", []Token{OperatorToken("tok-op")}, "tok-op", RoleOperator},
		{"auth off", nil, "", RoleOperator},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got fakv1.Role
			mux := http.NewServeMux()
			mux.Handle(path, connect.NewUnaryHandler(path,
				func(ctx context.Context, _ *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
					got = callerRole(ctx)
					return connect.NewResponse(&emptypb.Empty{}), nil
				}, connect.WithInterceptors(newAuthInterceptor(tc.tokens, nil))))
			base := serveH2C(t, mux)
			if err := call(context.Background(), apiclient.NewHTTPClient(), base, procedure{path: path}, tc.token); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("handler saw role %v, want %v", got, tc.want)
			}
		})
	}
}
