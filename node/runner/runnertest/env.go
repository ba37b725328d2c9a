package runnertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// NeedTool skips a test when a program it runs is missing, except under CI
// (CI set), where .ci/run installs it and its absence fails the test.
func NeedTool(t testing.TB, program, debianPackage string) {
	t.Helper()
	if _, err := exec.LookPath(program); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed; .ci/run installs the Debian package %s", program, debianPackage)
		}
		t.Skipf("%s is not installed (Debian: %s)", program, debianPackage)
	}
}

// SecretToken is what the token file of Secrets holds.
const SecretToken = "secret-token"

// Secrets is what a sandboxed runtime must not reach: a node's data dir
// (with a state file and a workspaces directory), its token file, and a
// directory outside any workspace.
type Secrets struct {
	Data, Tokens, Outside string
}

// Workspace is a session's workspace inside the data dir, created: the
// sandbox must keep it visible and writable while it hides the data dir.
func (s Secrets) Workspace(t testing.TB, session string) string {
	t.Helper()
	ws := filepath.Join(s.Data, "workspaces", session)
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	return ws
}

// NewSecrets lays Secrets out under the test's working directory, not
// under /tmp: a sandbox replaces /tmp with its own, which would hide
// anything there whether or not the sandbox was told to. Removed when the
// test ends.
func NewSecrets(t testing.TB) Secrets {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.MkdirTemp(wd, ".sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	s := Secrets{Data: filepath.Join(root, "data"), Tokens: filepath.Join(root, "tokens"), Outside: filepath.Join(root, "outside")}
	for _, d := range []string{s.Data, s.Outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(s.Tokens, []byte(SecretToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Data, "fsm.db"), []byte("node-state"), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}
