package exec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fak-dev/fak/node/runner/proc/proctest"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

// Under bwrap the agent cannot read the node's tokens file or data dir,
// nor write anywhere but its workspace.
func TestBwrapSandboxConfinesTheAgent(t *testing.T) {
	t.Parallel()
	runnertest.NeedTool(t, "bwrap", "bubblewrap")
	sec := runnertest.NewSecrets(t)
	data, tokens, outside := sec.Data, sec.Tokens, sec.Outside
	script := shell(
		`echo ok > inside.txt && echo WROTE-INSIDE`,
		`cat `+tokens+` && echo READ-TOKENS`,
		`cat `+filepath.Join(data, "fsm.db")+` && echo READ-DATA`,
		`echo x > `+filepath.Join(outside, "x")+` && echo WROTE-OUTSIDE`,
		`echo x > /tmp/fak-sandbox-probe && echo WROTE-TMP`,
		`true`,
	)
	rt, ws := start(t, Options{Command: script, Sandbox: "bwrap", Hide: []string{data, tokens}}, nil, 0)
	tr := &runnertest.Turn{Input: 1}
	if _, err := proctest.RunTurn(t, rt, inputEvent(1, "x"), tr); err != nil {
		t.Fatal(err)
	}
	got := tr.Output()
	if !strings.Contains(got, "WROTE-INSIDE") {
		t.Fatalf("the agent could not write its workspace: %q", got)
	}
	for _, leak := range []string{runnertest.SecretToken, "READ-TOKENS", "node-state", "READ-DATA", "WROTE-OUTSIDE"} {
		if strings.Contains(got, leak) {
			t.Fatalf("the sandbox let through %q: %q", leak, got)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
		t.Fatal("the sandboxed agent wrote outside its workspace")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "inside.txt")); err != nil || string(b) != "ok\n" {
		t.Fatalf("workspace file %q %v", b, err)
	}
	// /tmp is the sandbox's own: nothing reaches the host's.
	if _, err := os.Stat("/tmp/fak-sandbox-probe"); err == nil {
		t.Fatal("the sandboxed agent wrote the host's /tmp")
	}
}
