package node_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api"
	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// aclWait bounds how long a node may take to apply a create or revoke.
const aclWait = 10 * time.Second

func aclClient(c *testcluster.Cluster, n *testcluster.Node, token string) fakv1connect.AclServiceClient {
	return fakv1connect.NewAclServiceClient(c.HTTPClient(), c.BaseURL(n), connect.WithInterceptors(apiclient.Bearer(token)))
}

func sessionsAs(c *testcluster.Cluster, n *testcluster.Node, token string) fakv1connect.SessionServiceClient {
	return fakv1connect.NewSessionServiceClient(c.HTTPClient(), c.BaseURL(n), connect.WithInterceptors(apiclient.Bearer(token)))
}

func createACLToken(t *testing.T, c *testcluster.Cluster, via *testcluster.Node, role fakv1.Role, description string) *fakv1.CreateTokenResponse {
	t.Helper()
	resp, err := aclClient(c, via, testcluster.Token).CreateToken(ctxT(t, 15*time.Second),
		connect.NewRequest(&fakv1.CreateTokenRequest{Role: role, Description: description}))
	if err != nil {
		t.Fatalf("create %s token via %s: %v", apiclient.RoleName(role), via.Name, err)
	}
	if resp.Msg.Secret == "" || resp.Msg.GetToken().GetAccessorId() == "" || resp.Msg.GetToken().GetRole() != role {
		t.Fatalf("create token: %v", resp.Msg)
	}
	return resp.Msg
}

func listSessionsCode(c *testcluster.Cluster, n *testcluster.Node, token string) connect.Code {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := sessionsAs(c, n, token).ListSessions(ctx, connect.NewRequest(&fakv1.ListSessionsRequest{}))
	if err == nil {
		return 0
	}
	return connect.CodeOf(err)
}

// TestACL_RevokeIsClusterWide: a token created through one node works on
// another with its role, and once revoked through a third it is refused by
// every node.
func TestACL_RevokeIsClusterWide(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	leader := c.WaitForLeader(10 * time.Second)
	followers := c.Followers()
	creator, user, revoker := followers[0], followers[1], leader

	tok := createACLToken(t, c, creator, fakv1.Role_ROLE_AGENT, "ci")
	c.WaitFor(aclWait, "the new token to work on "+user.Name, func() bool {
		return listSessionsCode(c, user, tok.Secret) == 0
	})
	// An agent creates sessions, but does not manage tokens.
	if _, err := sessionsAs(c, user, tok.Secret).CreateSession(ctxT(t, 15*time.Second),
		connect.NewRequest(&fakv1.CreateSessionRequest{Title: "by the agent token"})); err != nil {
		t.Fatalf("agent token: create session on %s: %v", user.Name, err)
	}
	_, err := aclClient(c, user, tok.Secret).ListTokens(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.ListTokensRequest{}))
	if connect.CodeOf(err) != connect.CodePermissionDenied || apiclient.ErrorInfo(err).GetReason() != api.ReasonPermissionDenied {
		t.Fatalf("agent token listing tokens: %v, want permission denied", err)
	}

	list, err := aclClient(c, revoker, testcluster.Token).ListTokens(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.ListTokensRequest{}))
	if err != nil || len(list.Msg.Tokens) != 1 || list.Msg.Tokens[0].AccessorId != tok.Token.AccessorId ||
		list.Msg.Tokens[0].Description != "ci" || list.Msg.Tokens[0].CreatedUnixNano == 0 {
		t.Fatalf("list tokens: %v, %v", list, err)
	}

	if _, err := aclClient(c, revoker, testcluster.Token).RevokeToken(ctxT(t, 15*time.Second),
		connect.NewRequest(&fakv1.RevokeTokenRequest{AccessorId: tok.Token.AccessorId})); err != nil {
		t.Fatalf("revoke via %s: %v", revoker.Name, err)
	}
	for _, n := range c.Nodes {
		c.WaitFor(aclWait, "the revoked token to be refused on "+n.Name, func() bool {
			return listSessionsCode(c, n, tok.Secret) == connect.CodeUnauthenticated
		})
	}
	// Refused for good: a node never accepts it again.
	for _, n := range c.Nodes {
		if code := listSessionsCode(c, n, tok.Secret); code != connect.CodeUnauthenticated {
			t.Errorf("%s: revoked token answered %v", n.Name, code)
		}
	}
	_, err = aclClient(c, user, testcluster.Token).RevokeToken(ctxT(t, 15*time.Second),
		connect.NewRequest(&fakv1.RevokeTokenRequest{AccessorId: tok.Token.AccessorId}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("revoking again: %v, want not found", err)
	}
}

// TestACL_ReadTokenObserves: a read token describes and watches a session
// (the observe path) but cannot write to it.
func TestACL_ReadTokenObserves(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	leader := c.WaitForLeader(10 * time.Second)
	id := createSession(t, c, leader, "observed")
	tok := createACLToken(t, c, leader, fakv1.Role_ROLE_READ, "")
	n := c.Followers()[0]
	c.WaitFor(aclWait, "the read token to work on "+n.Name, func() bool {
		return listSessionsCode(c, n, tok.Secret) == 0
	})
	rs := sessionsAs(c, n, tok.Secret)
	if _, err := rs.DescribeSession(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id})); err != nil {
		t.Fatalf("read token: describe: %v", err)
	}
	stream, err := rs.WatchEvents(ctxT(t, 10*time.Second), connect.NewRequest(&fakv1.WatchEventsRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var events int
	for events == 0 && stream.Receive() {
		events += len(stream.Msg().Events)
	}
	if events == 0 {
		t.Fatalf("read token: watch ended without events: %v", stream.Err())
	}
	_, err = rs.AppendEvents(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.AppendEventsRequest{
		SessionId: id, Events: []*fakv1.EventInput{{Kind: "note", Text: "x"}}}))
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("read token appending: %v, want permission denied", err)
	}
}

// TestACL_CreateRetryKeepsSecretOnce: a create retried with its request id
// does not mint a second token, and does not show the secret again.
func TestACL_CreateRetryKeepsSecretOnce(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	leader := c.WaitForLeader(10 * time.Second)
	via := c.Followers()[0]
	req := &fakv1.CreateTokenRequest{Role: fakv1.Role_ROLE_OPERATOR, RequestId: "req-acl-retry"}
	if _, err := aclClient(c, via, testcluster.Token).CreateToken(ctxT(t, 15*time.Second), connect.NewRequest(req)); err != nil {
		t.Fatal(err)
	}
	_, err := aclClient(c, leader, testcluster.Token).CreateToken(ctxT(t, 15*time.Second), connect.NewRequest(req))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeAlreadyExists {
		t.Fatalf("retried create: %v, want already exists", err)
	}
	list, err := aclClient(c, leader, testcluster.Token).ListTokens(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.ListTokensRequest{}))
	if err != nil || len(list.Msg.Tokens) != 1 {
		t.Fatalf("tokens after a retried create: %v, %v", list, err)
	}
}

// TestConfig_TokensNeedAnOperator: with auth on, the node's own runner
// writes with an operator token, so a tokens file without one is refused
// at start, saying so.
func TestConfig_TokensNeedAnOperator(t *testing.T) {
	cfg := node.Config{
		Name: "n1", DataDir: t.TempDir(),
		APIAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
		Tokens: []api.Token{{Secret: "a", Role: api.RoleAgent}, {Secret: "r", Role: api.RoleRead}},
	}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "no operator token") {
		t.Fatalf("Validate without an operator token: %v", err)
	}
	cfg.Tokens = append(cfg.Tokens, api.OperatorToken("o"))
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate with an operator token: %v", err)
	}
	cfg.Tokens = nil
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate with auth off: %v", err)
	}
}
