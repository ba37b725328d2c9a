package api

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// applyCmd applies one command to f as the next log entry.
func applyCmd(t *testing.T, f *fsm.FSM, index uint64, c *fsmpb.Command) {
	t.Helper()
	c.TimeUnixNano = int64(index) * 1e9
	data, err := fsm.EncodeBatch([]*fsmpb.Command{c})
	if err != nil {
		t.Fatal(err)
	}
	rs := f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}).([]*fsmpb.Result)
	if err := fsm.ResultError(rs[0]); err != nil {
		t.Fatalf("apply %v: %v", c, err)
	}
}

// TestAclTokensAuthenticate: a token stored in the FSM authenticates with
// its role next to the file tokens, and stops at once when revoked.
func TestAclTokensAuthenticate(t *testing.T) {
	f, err := fsm.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	sum := sha256.Sum256([]byte("acl-read"))
	applyCmd(t, f, 1, &fsmpb.Command{Body: &fsmpb.Command_CreateAclToken{CreateAclToken: &fsmpb.CreateAclToken{
		AccessorId: "acc_1", SecretSha256: sum[:], Role: fsm.RoleRead,
	}}})
	base := serveH2C(t, interceptorMux(newAuthInterceptor([]Token{OperatorToken("tok-operator")}, f)))
	hc := apiclient.NewHTTPClient()
	read := procedure{path: fakv1connect.SessionServiceListSessionsProcedure}
	agent := procedure{path: fakv1connect.SessionServiceCreateSessionProcedure}
	cred := credential{"the ACL read token", "acl-read", RoleRead}
	for _, p := range []procedure{read, agent} {
		checkOutcome(t, p, cred, call(context.Background(), hc, base, p, cred.token))
	}

	applyCmd(t, f, 2, &fsmpb.Command{Body: &fsmpb.Command_RevokeAclToken{RevokeAclToken: &fsmpb.RevokeAclToken{AccessorId: "acc_1"}}})
	revoked := credential{"the revoked token", "acl-read", fakv1.Role_ROLE_UNSPECIFIED}
	checkOutcome(t, read, revoked, call(context.Background(), hc, base, read, revoked.token))
	// File tokens are unaffected.
	checkOutcome(t, agent, fileCredentials[4], call(context.Background(), hc, base, agent, "tok-operator"))
}

// TestAclTokensNeedAuthOn: with no file tokens auth is off, and ACL tokens
// do not turn it on (every listed procedure is open).
func TestAclTokensNeedAuthOn(t *testing.T) {
	base := serveH2C(t, interceptorMux(newAuthInterceptor(nil, nil)))
	p := procedure{path: fakv1connect.AclServiceCreateTokenProcedure}
	err := call(context.Background(), apiclient.NewHTTPClient(), base, p, "")
	if c := connect.CodeOf(err); c == connect.CodeUnauthenticated || c == connect.CodePermissionDenied {
		t.Fatalf("auth off: %v", err)
	}
}

func TestParseTokens(t *testing.T) {
	got, err := ParseTokens(strings.NewReader(`
# comment
bare-secret
operator op-secret
  agent   agent-secret
read read-secret
`), "tokens")
	if err != nil {
		t.Fatal(err)
	}
	want := []Token{OperatorToken("bare-secret"), OperatorToken("op-secret"), {"agent-secret", RoleAgent}, {"read-secret", RoleRead}}
	if fmt.Sprint(len(got)) != fmt.Sprint(len(want)) {
		t.Fatalf("got %d tokens, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("token %d: %+v, want %+v", i, got[i].Role, want[i].Role)
		}
	}
	if s, ok := OperatorSecret(got); !ok || s != "bare-secret" {
		t.Errorf("OperatorSecret = %q %v", s, ok)
	}
	if _, ok := OperatorSecret(got[2:]); ok {
		t.Error("OperatorSecret found one among agent and read tokens")
	}

	for _, tc := range []struct{ text, want string }{
		{"read ok\nadmin s3cr3t-value\n", "line 2: unknown role"},
		{"# c\n\na b c\n", "line 3: want"},
		{"# only comments\n\n", "holds no token"},
	} {
		_, err := ParseTokens(strings.NewReader(tc.text), "tokens")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.text, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "admin")) {
			t.Errorf("error shows the line's content: %v", err)
		}
	}
}

// TestTokenNeverPrints: a config printed in a log shows roles, not secrets.
func TestTokenNeverPrints(t *testing.T) {
	cfg := Config{Tokens: []Token{OperatorToken("s3cr3t"), {"s3cr3t2", RoleRead}}}
	for _, s := range []string{fmt.Sprint(cfg.Tokens), fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg.Tokens)} {
		if strings.Contains(s, "s3cr3t") {
			t.Fatalf("secret printed: %s", s)
		}
	}
}
