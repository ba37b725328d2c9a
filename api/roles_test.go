package api

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/fsm"
)

// procedure is one RPC of the API as the generated descriptors declare it.
type procedure struct {
	path                         string
	clientStreams, serverStreams bool
}

// apiProcedures lists every procedure of every fak.v1 service from the
// registered descriptors, plus gRPC reflection, which the server mounts too.
func apiProcedures(t *testing.T) []procedure {
	t.Helper()
	var out []procedure
	protoregistry.GlobalFiles.RangeFilesByPackage("fak.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			for j := 0; j < sd.Methods().Len(); j++ {
				md := sd.Methods().Get(j)
				out = append(out, procedure{
					path:          "/" + string(sd.FullName()) + "/" + string(md.Name()),
					clientStreams: md.IsStreamingClient(), serverStreams: md.IsStreamingServer(),
				})
			}
		}
		return true
	})
	if len(out) < 40 {
		t.Fatalf("found only %d fak.v1 procedures; descriptors not registered?", len(out))
	}
	for _, svc := range []string{grpcreflect.ReflectV1ServiceName, grpcreflect.ReflectV1AlphaServiceName} {
		out = append(out, procedure{path: "/" + svc + "/ServerReflectionInfo", clientStreams: true, serverStreams: true})
	}
	return out
}

// TestEveryProcedureHasARole: a procedure added to a proto without a role
// table entry would be refused to everyone; catch it here instead. And the
// table names no procedure that does not exist.
func TestEveryProcedureHasARole(t *testing.T) {
	known := map[string]bool{}
	for _, p := range apiProcedures(t) {
		known[p.path] = true
		role, ok := requiredRole(p.path)
		if !ok {
			t.Errorf("%s has no entry in procedureRoles (api/roles.go)", p.path)
			continue
		}
		if apiclient.RoleName(role) == "unknown" {
			t.Errorf("%s needs role %v, not one of read, agent, operator", p.path, role)
		}
	}
	for path := range procedureRoles {
		if !known[path] {
			t.Errorf("procedureRoles names %s, which no service declares", path)
		}
	}
}

// serveH2C serves h on a loopback listener with HTTP/1.1 and h2c, like the
// API server, so streaming procedures work.
func serveH2C(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: p, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// call invokes a procedure with an empty message (which decodes as any
// request type) and returns the error it ends with, nil on success.
func call(ctx context.Context, hc *http.Client, base string, p procedure, token string) error {
	var opts []connect.ClientOption
	if token != "" {
		opts = append(opts, connect.WithInterceptors(apiclient.Bearer(token)))
	}
	c := connect.NewClient[emptypb.Empty, emptypb.Empty](hc, base+p.path, opts...)
	switch {
	case p.clientStreams && p.serverStreams:
		s := c.CallBidiStream(ctx)
		_ = s.CloseRequest()
		_, err := s.Receive()
		_ = s.CloseResponse()
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	case p.clientStreams:
		s := c.CallClientStream(ctx)
		_, err := s.CloseAndReceive()
		return err
	case p.serverStreams:
		s, err := c.CallServerStream(ctx, connect.NewRequest(&emptypb.Empty{}))
		if err != nil {
			return err
		}
		defer s.Close()
		// The first message or the end of the stream settles auth.
		s.Receive()
		return s.Err()
	default:
		_, err := c.CallUnary(ctx, connect.NewRequest(&emptypb.Empty{}))
		return err
	}
}

// credential is how a call in the table authenticates.
type credential struct {
	name  string
	token string
	role  fakv1.Role // UNSPECIFIED: not a valid token
}

// checkOutcome asserts the code (and for a refusal the reason and message)
// a call with cred to p must end with; allowed calls may fail for any other
// reason once past authorization (the handlers here are not real).
func checkOutcome(t *testing.T, p procedure, cred credential, err error) {
	t.Helper()
	need := procedureRoles[p.path]
	code := connect.CodeOf(err)
	switch {
	case cred.role == fakv1.Role_ROLE_UNSPECIFIED:
		if code != connect.CodeUnauthenticated || apiclient.ErrorInfo(err).GetReason() != ReasonUnauth {
			t.Errorf("%s with %s: %v (reason %q), want unauthenticated", p.path, cred.name, err, apiclient.ErrorInfo(err).GetReason())
		}
	case cred.role < need:
		if code != connect.CodePermissionDenied || apiclient.ErrorInfo(err).GetReason() != ReasonPermissionDenied {
			t.Errorf("%s with %s: %v (reason %q), want permission denied", p.path, cred.name, err, apiclient.ErrorInfo(err).GetReason())
		} else if msg := err.(*connect.Error).Message(); msg != apiclient.RoleName(need)+" role required" {
			t.Errorf("%s with %s: message %q, want %q", p.path, cred.name, msg, apiclient.RoleName(need)+" role required")
		}
		if cred.token != "" && strings.Contains(err.Error(), cred.token) {
			t.Errorf("%s: the error shows the token: %v", p.path, err)
		}
	default:
		if code == connect.CodePermissionDenied || code == connect.CodeUnauthenticated {
			t.Errorf("%s with %s (%s role, %s needed): refused: %v", p.path, cred.name, apiclient.RoleName(cred.role), apiclient.RoleName(need), err)
		}
	}
}

// interceptorMux mounts every service with do-nothing handlers behind the
// auth interceptor, the way Server.Handler mounts the real ones.
func interceptorMux(a *authInterceptor) http.Handler {
	opt := connect.WithInterceptors(a)
	mux := http.NewServeMux()
	mux.Handle(fakv1connect.NewSessionServiceHandler(fakv1connect.UnimplementedSessionServiceHandler{}, opt))
	mux.Handle(fakv1connect.NewClusterServiceHandler(fakv1connect.UnimplementedClusterServiceHandler{}, opt))
	mux.Handle(fakv1connect.NewRunnerServiceHandler(fakv1connect.UnimplementedRunnerServiceHandler{}, opt))
	mux.Handle(fakv1connect.NewLifecycleServiceHandler(fakv1connect.UnimplementedLifecycleServiceHandler{}, opt))
	mux.Handle(fakv1connect.NewNodeServiceHandler(fakv1connect.UnimplementedNodeServiceHandler{}, opt))
	mux.Handle(fakv1connect.NewOperatorServiceHandler(fakv1connect.UnimplementedOperatorServiceHandler{}, opt))
	mux.Handle(fakv1connect.NewAclServiceHandler(fakv1connect.UnimplementedAclServiceHandler{}, opt))
	reflector := grpcreflect.NewStaticReflector(fakv1connect.SessionServiceName)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, opt))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, opt))
	return mux
}

var fileCredentials = []credential{
	{"no token", "", fakv1.Role_ROLE_UNSPECIFIED},
	{"a bad token", "not-a-token", fakv1.Role_ROLE_UNSPECIFIED},
	{"the read token", "tok-read", RoleRead},
	{"the agent token", "tok-agent", RoleAgent},
	{"the operator token", "tok-operator", RoleOperator},
}

// TestRoleTable: every procedure × every kind of credential is allowed or
// refused exactly as the role table says.
func TestRoleTable(t *testing.T) {
	a := newAuthInterceptor([]Token{
		{Secret: "tok-read", Role: RoleRead}, {Secret: "tok-agent", Role: RoleAgent}, OperatorToken("tok-operator"),
	}, nil)
	base := serveH2C(t, interceptorMux(a))
	hc := apiclient.NewHTTPClient()
	for _, p := range apiProcedures(t) {
		for _, cred := range fileCredentials {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := call(ctx, hc, base, p, cred.token)
			cancel()
			checkOutcome(t, p, cred, err)
		}
	}
}

// TestUnlistedProcedureIsRefused: a procedure the role table does not know
// is refused to an operator, and even with authentication off.
func TestUnlistedProcedureIsRefused(t *testing.T) {
	const path = "/fak.v1.Unlisted/Do"
	for _, tc := range []struct {
		name   string
		tokens []Token
	}{{"auth on", []Token{OperatorToken("tok-operator")}}, {"auth off", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.Handle(path, connect.NewUnaryHandler(path,
				func(context.Context, *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
					return connect.NewResponse(&emptypb.Empty{}), nil
				}, connect.WithInterceptors(newAuthInterceptor(tc.tokens, nil))))
			base := serveH2C(t, mux)
			err := call(context.Background(), apiclient.NewHTTPClient(), base, procedure{path: path}, "tok-operator")
			if connect.CodeOf(err) != connect.CodePermissionDenied || apiclient.ErrorInfo(err).GetReason() != ReasonPermissionDenied {
				t.Fatalf("unlisted procedure: %v, want permission denied", err)
			}
		})
	}
}

// TestServerMountsEveryServiceBehindAuth: the real server's handler puts
// every procedure behind the check (no token: unauthenticated; a read
// token: refused where more is needed), so no service is mounted without
// it. Refusals happen before any handler runs, so no cluster is needed.
func TestServerMountsEveryServiceBehindAuth(t *testing.T) {
	f, err := fsm.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	s := New(Config{NodeName: "n1", Tokens: []Token{{Secret: "tok-read", Role: RoleRead}}}, nil, f)
	base := serveH2C(t, s.Handler())
	hc := apiclient.NewHTTPClient()
	for _, p := range apiProcedures(t) {
		creds := []credential{fileCredentials[0], fileCredentials[1]}
		if procedureRoles[p.path] > RoleRead {
			creds = append(creds, fileCredentials[2])
		}
		for _, cred := range creds {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := call(ctx, hc, base, p, cred.token)
			cancel()
			checkOutcome(t, p, cred, err)
		}
	}
}

// TestRequireRoleHTTP: a plain HTTP handler behind requireRole answers 401
// without a valid token, 403 below the role, and runs at or above it.
func TestRequireRoleHTTP(t *testing.T) {
	a := newAuthInterceptor([]Token{{Secret: "tok-read", Role: RoleRead}, OperatorToken("tok-operator")}, nil)
	base := serveH2C(t, a.requireRole(RoleOperator, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})))
	for _, tc := range []struct {
		token string
		code  int
	}{{"", 401}, {"nope", 401}, {"tok-read", 403}, {"tok-operator", 200}} {
		req, _ := http.NewRequest("GET", base+"/", nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("token %q: %d %s, want %d", tc.token, resp.StatusCode, body, tc.code)
		}
		if tc.code == 403 && !strings.Contains(string(body), "operator role required") {
			t.Errorf("403 body %s does not say which role is needed", body)
		}
	}
	open := serveH2C(t, newAuthInterceptor(nil, nil).requireRole(RoleOperator, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	resp, err := http.Get(open + "/")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("auth off: %v %v, want 200", resp, err)
	}
	resp.Body.Close()
}
