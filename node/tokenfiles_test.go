package node_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fak-dev/fak/api/gateway"
	"github.com/fak-dev/fak/api/gateway/gatewaytest"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// tokenFiles are the nodes' own tokens files, which a rotation test
// rewrites before it reloads a node.
type tokenFiles struct {
	t   *testing.T
	dir string
}

func newTokenFiles(t *testing.T) *tokenFiles {
	return &tokenFiles{t: t, dir: t.TempDir()}
}

func (tf *tokenFiles) path(nodeName string) string {
	return filepath.Join(tf.dir, nodeName+".tokens")
}

// write replaces a node's tokens file. It reports with Error, not Fatal:
// tests call it from the fake upstream's handler too.
func (tf *tokenFiles) write(nodeName, body string) {
	if err := os.WriteFile(tf.path(nodeName), []byte(body), 0o600); err != nil {
		tf.t.Error(err)
	}
}

// meteredNode configures a node to start with a tokens file holding the
// fleet's operator token and to meter calls to the fake upstream up.
func (tf *tokenFiles) meteredNode(up *gatewaytest.Upstream) func(name string, cfg *node.Config) {
	tf.t.Setenv("FAK_TEST_UPSTREAM_KEY", "sk-upstream")
	return func(name string, cfg *node.Config) {
		tf.write(name, "operator "+testcluster.Token+"\n")
		cfg.TokenFile = tf.path(name)
		cfg.Accounts = []node.AccountConfig{{Name: "anthropic-main", Provider: gateway.Anthropic, Upstream: up.URL, APIKeyEnv: "FAK_TEST_UPSTREAM_KEY"}}
	}
}
