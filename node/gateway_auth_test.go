package node_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fak-dev/fak/api/gateway"
	"github.com/fak-dev/fak/api/gateway/gatewaytest"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// Issue 32 §5: a read token at the gateway is a known caller whose role
// may not call models: 403 PERMISSION_DENIED in the provider's error
// shape (not 401), nothing sent upstream; an unknown token stays 401.
func TestGateway_AReadTokenIsForbiddenNotUnauthenticated(t *testing.T) {
	dir := t.TempDir()
	up := gatewaytest.New()
	t.Cleanup(up.Close)
	t.Setenv("FAK_TEST_UPSTREAM_KEY", "sk-upstream")
	c := testcluster.New(t, testcluster.Options{Configure: func(name string, cfg *node.Config) {
		file := filepath.Join(dir, name+".tokens")
		if err := os.WriteFile(file, []byte("operator "+testcluster.Token+"\nread a-reader\n"), 0o600); err != nil {
			t.Error(err)
		}
		cfg.TokenFile = file
		for _, p := range []string{gateway.Anthropic, gateway.OpenAI, gateway.Gemini} {
			cfg.Accounts = append(cfg.Accounts, node.AccountConfig{Name: p + "-main", Provider: p, Upstream: up.URL, APIKeyEnv: "FAK_TEST_UPSTREAM_KEY"})
		}
	}})
	c.WaitForLeader(30 * time.Second)
	for _, n := range c.Nodes {
		if _, err := n.Running().Reload(); err != nil {
			t.Fatalf("reload %s: %v", n.Name, err)
		}
	}
	id := createSession(t, c, c.Leader(), "auth")
	base := c.BaseURL(c.Followers()[0]) + gateway.Prefix
	for _, tc := range []struct {
		call        gatewayCall
		key         string // the header the provider's client sends its key in
		status      int
		errType     string // the provider's error type (Gemini: status)
		fakReason   string
		description string
	}{
		{gatewayCalls[1], "X-Api-Key", 403, "permission_error", "PERMISSION_DENIED", "anthropic"},
		{gatewayCalls[3], "Authorization", 403, "permission_error", "PERMISSION_DENIED", "openai"},
		{gatewayCalls[7], "X-Goog-Api-Key", 403, "PERMISSION_DENIED", "PERMISSION_DENIED", "gemini"},
	} {
		for _, token := range []string{"a-reader", "not-a-token"} {
			key := token
			if tc.key == "Authorization" {
				key = "Bearer " + token
			}
			code, body := tc.call.do(t, c.HTTPClient(), base, 1, map[string]string{gateway.HeaderTraceID: id, tc.key: key})
			want, wantType, wantReason := tc.status, tc.errType, tc.fakReason
			if token == "not-a-token" {
				want, wantReason = http.StatusUnauthorized, "UNAUTHENTICATED"
				wantType = map[string]string{"anthropic": "authentication_error", "openai": "authentication_error", "gemini": "UNAUTHENTICATED"}[tc.description]
			}
			var shape struct {
				Type  string `json:"type"`
				Error struct {
					Type, Code any
					Status     string
				} `json:"error"`
			}
			_ = json.Unmarshal([]byte(body), &shape)
			gotType, _ := shape.Error.Type.(string)
			if tc.description == "gemini" {
				gotType = shape.Error.Status
			}
			if code != want || gotType != wantType || !json.Valid([]byte(body)) || !strings.Contains(body, wantReason) {
				t.Errorf("%s with %s: %d %s; want %d, type %s, reason %s", tc.description, token, code, body, want, wantType, wantReason)
			}
		}
	}
	if n := up.Requests(); n != 0 {
		t.Fatalf("%d refused calls reached the upstream", n)
	}
}
