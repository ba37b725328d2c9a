package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

// API tokens kept in the replicated state (AclService): created with a
// role, listed without their secrets, revoked fleet-wide. Every command
// needs an operator token.

func (c *cli) aclClient() fakv1connect.AclServiceClient {
	return fakv1connect.NewAclServiceClient(c.httpClient, c.baseURL, c.clientOpts...)
}

func aclTokenCreateCommand(fs *flag.FlagSet) runFunc {
	role := fs.String("role", "", "the token's `ROLE`: read, agent or operator (required)")
	description := fs.String("description", "", "free `TEXT` shown by list (who or what holds the token)")
	requestID := fs.String("request-id", "", "idempotency key: a retry with the same `ID` creates no second token")
	return func(ctx context.Context, c *cli, _ []string) error {
		r, ok := apiclient.ParseRole(*role)
		if !ok {
			return usageErrorf("--role must be read, agent or operator")
		}
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.aclClient().CreateToken(ctx, connect.NewRequest(&fakv1.CreateTokenRequest{
			Role: r, Description: *description, RequestId: *requestID,
		}))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg)
		}
		t := resp.Msg.GetToken()
		if err := writeFields(c.stdout, [][2]string{
			{"Accessor", t.GetAccessorId()},
			{"Role", apiclient.RoleName(t.GetRole())},
			{"Description", t.GetDescription()},
			{"Secret", resp.Msg.GetSecret()},
		}); err != nil {
			return err
		}
		_, err = fmt.Fprintln(c.stdout, "The secret is shown only this once: keep it now. Revoke with \"fakctl acl token revoke "+t.GetAccessorId()+"\".")
		return err
	}
}

func aclTokenListCommand(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, _ []string) error {
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.aclClient().ListTokens(ctx, connect.NewRequest(&fakv1.ListTokensRequest{}))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg)
		}
		tokens := resp.Msg.GetTokens()
		if len(tokens) == 0 {
			_, err := fmt.Fprintln(c.stdout, "no ACL tokens (tokens from the nodes' token files are not listed)")
			return err
		}
		rows := make([][]string, 0, len(tokens))
		for _, t := range tokens {
			rows = append(rows, []string{t.GetAccessorId(), apiclient.RoleName(t.GetRole()), t.GetDescription(), formatTime(t.GetCreatedUnixNano())})
		}
		return writeTable(c.stdout, []string{"ACCESSOR", "ROLE", "DESCRIPTION", "CREATED"}, rows)
	}
}

func aclTokenRevokeCommand(fs *flag.FlagSet) runFunc {
	requestID := fs.String("request-id", "", "idempotency key: a retry with the same `ID` answers like the first")
	return func(ctx context.Context, c *cli, args []string) error {
		accessor := strings.TrimSpace(args[0])
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		if _, err := c.aclClient().RevokeToken(ctx, connect.NewRequest(&fakv1.RevokeTokenRequest{
			AccessorId: accessor, RequestId: *requestID,
		})); err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, &fakv1.RevokeTokenResponse{})
		}
		_, err := fmt.Fprintf(c.stdout, "Revoked %s: every node refuses it once it has applied the revoke\n", accessor)
		return err
	}
}
