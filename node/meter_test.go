package node_test

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/gateway"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// Issue 32 §5: the node list says what meters each runtime, and a
// session's description what meters it: n2 has an Anthropic account, so
// its claude runtime is metered by its gateway; its codex runtime, with
// no OpenAI account, by the CLI's reported cost.
func TestNodeList_AndDescribeSayWhatMetersASession(t *testing.T) {
	t.Setenv("FAK_TEST_UPSTREAM_KEY", "sk-upstream")
	c := testcluster.New(t, testcluster.Options{Configure: func(name string, cfg *node.Config) {
		if name != "n2" {
			return
		}
		cfg.Accounts = []node.AccountConfig{{Name: "anthropic-main", Provider: gateway.Anthropic, Upstream: "http://127.0.0.1:9", APIKeyEnv: "FAK_TEST_UPSTREAM_KEY"}}
		cfg.Runtimes = append(cfg.Runtimes,
			node.RuntimeConfig{Name: "claude", Adapter: node.AdapterClaude, Policy: "acceptEdits", Command: []string{"claude"}},
			node.RuntimeConfig{Name: "codex", Adapter: node.AdapterCodex, Policy: "workspace-write", Command: []string{"codex"}})
	}})
	l := c.WaitForLeader(30 * time.Second)
	c.WaitFor(30*time.Second, "n2's record", func() bool {
		resp, err := c.NodeClient(l).ListNodes(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.ListNodesRequest{}))
		if err != nil {
			return false
		}
		for _, n := range resp.Msg.Nodes {
			if n.Name == "n2" {
				return strings.Join(n.RuntimeMeters, ",") == "claude=gateway,codex=cli"
			}
		}
		return false
	})
	for rt, want := range map[string]string{"claude": "gateway", "codex": "cli", "echo": ""} {
		id := createPlaced(t, c, l, rt, "n2")
		d, err := c.Sessions(l).DescribeSession(ctxT(t, 10*time.Second), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		if d.Msg.MeteredBy != want {
			t.Errorf("a %s session on n2 is metered by %q, want %q", rt, d.Msg.MeteredBy, want)
		}
	}
}
