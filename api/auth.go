package api

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
)

// Token is a bearer token a node accepts from its tokens file, with the role
// it grants. Its String never shows the secret, so a logged config does not
// leak it.
type Token struct {
	Secret string
	Role   fakv1.Role
}

func (t Token) String() string   { return apiclient.RoleName(t.Role) + " token" }
func (t Token) GoString() string { return "api.Token{" + apiclient.RoleName(t.Role) + "}" }

// OperatorToken is a token with every right (a dev fleet's, a test's).
func OperatorToken(secret string) Token { return Token{Secret: secret, Role: RoleOperator} }

// OperatorSecret returns the secret of the first operator token, the one a
// node's own runner writes with.
func OperatorSecret(tokens []Token) (string, bool) {
	for _, t := range tokens {
		if t.Role == RoleOperator {
			return t.Secret, true
		}
	}
	return "", false
}

// LoadTokens reads a tokens file: each line `<role> <token>` (role one of
// operator, agent, read) or a bare `<token>`, which is an operator token
// (files written before roles existed). Blank lines and lines starting with
// # are ignored.
func LoadTokens(path string) ([]Token, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	return ParseTokens(f, path)
}

// ParseTokens reads the tokens file format from r; name labels errors.
// Errors name the line, never its content: it may hold a secret.
func ParseTokens(r io.Reader, name string) ([]Token, error) {
	var tokens []Token
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		switch len(fields) {
		case 1:
			tokens = append(tokens, OperatorToken(fields[0]))
		case 2:
			role, ok := apiclient.ParseRole(fields[0])
			if !ok {
				return nil, fmt.Errorf("token file %s line %d: unknown role (want operator, agent or read before the token)", name, n)
			}
			tokens = append(tokens, Token{Secret: fields[1], Role: role})
		default:
			return nil, fmt.Errorf("token file %s line %d: want `<role> <token>` or `<token>`", name, n)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token file %s: %w", name, err)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("token file %s holds no token", name)
	}
	return tokens, nil
}

// authInterceptor checks the bearer token and its role on every unary and
// streaming RPC. A token is either one of the node's file tokens (compared
// as SHA-256 digests in constant time) or an ACL token in the replicated
// state, looked up by the digest in the local replica, so a revoke applies
// on each node as soon as it applies the entry. Tokens are never logged.
type authInterceptor struct {
	// on: authentication is on (the node started with file tokens); it
	// stays as it started.
	on   bool
	file atomic.Pointer[[]fileToken] // replaced by a reload (setFile)
	fsm  *fsm.FSM                    // nil: file tokens only
}

type fileToken struct {
	digest [32]byte
	role   fakv1.Role
}

// newAuthInterceptor builds the check; no file tokens disables
// authentication (tests, --no-auth), though a procedure missing from the
// role table is still refused.
func newAuthInterceptor(tokens []Token, f *fsm.FSM) *authInterceptor {
	a := &authInterceptor{fsm: f, on: len(tokens) > 0}
	a.setFile(tokens)
	return a
}

// setFile makes tokens the file tokens accepted from now on.
func (a *authInterceptor) setFile(tokens []Token) {
	file := make([]fileToken, 0, len(tokens))
	for _, t := range tokens {
		file = append(file, fileToken{digest: sha256.Sum256([]byte(t.Secret)), role: t.Role})
	}
	a.file.Store(&file)
}

func (a *authInterceptor) enabled() bool { return a.on }

func unauthenticated(msg string) *connect.Error {
	return newError(connect.CodeUnauthenticated, &fakv1.ErrorInfo{Reason: ReasonUnauth}, msg)
}

func permissionDenied(msg string) *connect.Error {
	return newError(connect.CodePermissionDenied, &fakv1.ErrorInfo{Reason: ReasonPermissionDenied}, msg)
}

// authenticate returns the role of the request's bearer token.
func (a *authInterceptor) authenticate(h http.Header) (fakv1.Role, error) {
	token, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return 0, unauthenticated("missing bearer token")
	}
	d := sha256.Sum256([]byte(token))
	// Compare with every file token, whatever matches, in constant time.
	role := fakv1.Role_ROLE_UNSPECIFIED
	for _, ft := range *a.file.Load() {
		if subtle.ConstantTimeCompare(d[:], ft.digest[:]) == 1 {
			role = max(role, ft.role)
		}
	}
	if role != fakv1.Role_ROLE_UNSPECIFIED {
		return role, nil
	}
	if a.fsm != nil {
		rec, err := a.fsm.LookupAclToken(d[:])
		if err != nil {
			return 0, connect.NewError(connect.CodeInternal, fmt.Errorf("token lookup: %w", err))
		}
		if rec != nil {
			if r, ok := apiclient.ParseRole(rec.Role); ok {
				return r, nil
			}
		}
	}
	return 0, unauthenticated("invalid bearer token")
}

// authorize checks that the request may call procedure: known to the role
// table, and (with auth on) carrying a token of at least the role it needs.
// It returns the caller's role: the token's, or operator with auth off.
func (a *authInterceptor) authorize(procedure string, h http.Header) (fakv1.Role, error) {
	need, ok := requiredRole(procedure)
	if !ok {
		return 0, permissionDenied("procedure " + procedure + " is not allowed to any role")
	}
	if !a.enabled() {
		return RoleOperator, nil
	}
	return a.requireRoleOf(need, h)
}

// authorizeCall is authorize, unless the HTTP guard (httpguard.go)
// authorized this very procedure from the same headers before the body was
// read: then its role, without a second token lookup.
func (a *authInterceptor) authorizeCall(ctx context.Context, procedure string, h http.Header) (fakv1.Role, error) {
	if role, ok := guardedRole(ctx, procedure); ok {
		return role, nil
	}
	return a.authorize(procedure, h)
}

func (a *authInterceptor) require(need fakv1.Role, h http.Header) error {
	_, err := a.requireRoleOf(need, h)
	return err
}

func (a *authInterceptor) requireRoleOf(need fakv1.Role, h http.Header) (fakv1.Role, error) {
	have, err := a.authenticate(h)
	if err != nil {
		return 0, err
	}
	if have < need {
		return 0, permissionDenied(apiclient.RoleName(need) + " role required")
	}
	return have, nil
}

// callerRoleKey keys the caller's role in a handler's context.
type callerRoleKey struct{}

// withCallerRole is ctx carrying the role the call was authorized with.
func withCallerRole(ctx context.Context, r fakv1.Role) context.Context {
	return context.WithValue(ctx, callerRoleKey{}, r)
}

// callerRole is the role the call was authorized with; unspecified when
// it did not pass the auth interceptor.
func callerRole(ctx context.Context) fakv1.Role {
	r, _ := ctx.Value(callerRoleKey{}).(fakv1.Role)
	return r
}

// check authenticates a plain HTTP request: any valid token (every role
// includes read).
func (a *authInterceptor) check(h http.Header) error {
	if !a.enabled() {
		return nil
	}
	_, err := a.authenticate(h)
	return err
}

// requireRole guards a plain HTTP handler (not an RPC) with a role: 401
// without a valid token, 403 with one of a lower role, a JSON error body
// either way. Open when auth is off.
func (a *authInterceptor) requireRole(role fakv1.Role, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.enabled() {
			next.ServeHTTP(w, r)
			return
		}
		if err := a.require(role, r.Header); err != nil {
			code := http.StatusInternalServerError
			switch connect.CodeOf(err) {
			case connect.CodeUnauthenticated:
				code = http.StatusUnauthorized
				w.Header().Set("WWW-Authenticate", "Bearer")
			case connect.CodePermissionDenied:
				code = http.StatusForbidden
			}
			var msg string
			if ce, ok := err.(*connect.Error); ok {
				msg = ce.Message()
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if !req.Spec().IsClient {
			role, err := a.authorizeCall(ctx, req.Spec().Procedure, req.Header())
			if err != nil {
				return nil, err
			}
			ctx = withCallerRole(ctx, role)
		}
		return next(ctx, req)
	}
}

func (a *authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a *authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		role, err := a.authorizeCall(ctx, conn.Spec().Procedure, conn.RequestHeader())
		if err != nil {
			return err
		}
		return next(withCallerRole(ctx, role), conn)
	}
}
