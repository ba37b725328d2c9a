package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/fak-dev/fak/node/testcluster"
)

// TestACLTokenCommands: create prints the secret once, and it works; list
// shows the token without it; revoke makes the fleet refuse it.
func TestACLTokenCommands(t *testing.T) {
	fleet := oneNodeFleet(t)
	addr := fleet.Nodes[0].APIAddr

	code, out, errOut := runCLI(t, addr, "acl", "token", "create", "--role", "read", "--description", "dashboards")
	if code != exitOK {
		t.Fatalf("create: code %d stderr %q", code, errOut)
	}
	accessor := regexp.MustCompile(`(?m)^Accessor:\s+(acc_\w+)$`).FindStringSubmatch(out)
	secret := regexp.MustCompile(`(?m)^Secret:\s+(fak_[0-9a-f]{64})$`).FindStringSubmatch(out)
	if accessor == nil || secret == nil || !regexp.MustCompile(`(?m)^Role:\s+read$`).MatchString(out) {
		t.Fatalf("create output:\n%s", out)
	}

	code, out, errOut = runCLI(t, addr, "-o", "json", "acl", "token", "create", "--role", "agent")
	var created struct {
		Token  struct{ AccessorID, Role string } `json:"token"`
		Secret string                            `json:"secret"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &created) != nil || created.Secret == "" || created.Token.Role != "ROLE_AGENT" {
		t.Fatalf("create -o json: code %d stdout %q stderr %q", code, out, errOut)
	}

	code, out, errOut = runCLI(t, addr, "acl", "token", "list")
	if code != exitOK || !strings.HasPrefix(out, "ACCESSOR") || !regexp.MustCompile(accessor[1]+`\s+read\s+dashboards\s+\d{4}-`).MatchString(out) ||
		strings.Contains(out, secret[1]) || strings.Count(out, "\n") != 3 {
		t.Fatalf("list: code %d stdout %q stderr %q", code, out, errOut)
	}

	// The read token lists sessions but cannot manage tokens.
	t.Setenv("FAK_TOKEN", secret[1])
	if code, _, errOut := runCLI(t, addr, "session", "list"); code != exitOK {
		t.Fatalf("session list with the read token: code %d stderr %q", code, errOut)
	}
	code, _, errOut = runCLI(t, addr, "acl", "token", "list")
	if code != exitError || !strings.Contains(errOut, "PERMISSION_DENIED") || !strings.Contains(errOut, "operator role required") {
		t.Fatalf("acl token list with the read token: code %d stderr %q", code, errOut)
	}

	t.Setenv("FAK_TOKEN", testcluster.Token)
	code, out, errOut = runCLI(t, addr, "acl", "token", "revoke", accessor[1])
	if code != exitOK || !strings.HasPrefix(out, "Revoked "+accessor[1]) {
		t.Fatalf("revoke: code %d stdout %q stderr %q", code, out, errOut)
	}
	code, _, errOut = runCLI(t, addr, "acl", "token", "revoke", accessor[1])
	if code != exitError || !strings.Contains(errOut, "NOT_FOUND") {
		t.Fatalf("revoke again: code %d stderr %q", code, errOut)
	}
	t.Setenv("FAK_TOKEN", secret[1])
	code, _, errOut = runCLI(t, addr, "session", "list")
	if code != exitError || !strings.Contains(errOut, "UNAUTHENTICATED") {
		t.Fatalf("session list with the revoked token (one node: applied before the revoke returned): code %d stderr %q", code, errOut)
	}

	t.Setenv("FAK_TOKEN", testcluster.Token)
	code, _, errOut = runCLI(t, addr, "acl", "token", "create", "--role", "admin")
	if code != exitUsage || !strings.Contains(errOut, "--role must be read, agent or operator") {
		t.Fatalf("create --role admin: code %d stderr %q", code, errOut)
	}
}
