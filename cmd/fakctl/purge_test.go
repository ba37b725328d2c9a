package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fak-dev/fak/node/testcluster"
)

// fakctl session purge refuses an active session with its reason, purges
// a stopped one (which is then gone on every node), and fakctl audit log
// and fleet show what was purged.
func TestPurgeAgainstARealFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an in-process fleet; skipped with -short")
	}
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testcluster.Token)
	fleet := testcluster.New(t, testcluster.Options{Nodes: 3})
	addr := fleet.Followers()[0].APIAddr

	code, out, errOut := runCLI(t, addr, "session", "create", "--title", "old work")
	if code != exitOK {
		t.Fatalf("create: code %d stderr %q", code, errOut)
	}
	id := strings.TrimSpace(out)
	if code, _, errOut := runCLI(t, addr, "session", "purge", id); code != exitError || !strings.Contains(errOut, "NOT_STOPPED") {
		t.Fatalf("purge of an active session: code %d stderr %q; want exit 1 naming NOT_STOPPED", code, errOut)
	}
	if code, _, errOut := runCLI(t, addr, "session", "stop", id); code != exitOK {
		t.Fatalf("stop: code %d stderr %q", code, errOut)
	}
	code, out, errOut = runCLI(t, addr, "session", "purge", id)
	if code != exitOK || !strings.Contains(out, "Purged "+id+": 3 events") || !strings.Contains(out, "(audit #1)") {
		t.Fatalf("purge: code %d stdout %q stderr %q", code, out, errOut)
	}
	// Read your writes: the follower lists the purge it just forwarded.
	code, out, errOut = runCLI(t, addr, "audit", "log")
	if code != exitOK || !strings.Contains(out, "session.purged") || !strings.Contains(out, id) || !strings.Contains(out, "old work") ||
		!strings.Contains(out, "operator token") {
		t.Fatalf("audit log: code %d stdout %q stderr %q", code, out, errOut)
	}
	for _, n := range fleet.Nodes {
		if code, _, errOut := runCLI(t, n.APIAddr, "session", "describe", id); code == exitOK || !strings.Contains(errOut, "NOT_FOUND") {
			t.Fatalf("describe on %s after the purge: code %d stderr %q; want NOT_FOUND", n.Name, code, errOut)
		}
	}
	code, out, _ = runCLI(t, addr, "audit", "log", "-o", "json")
	var log struct {
		Entries []struct {
			Seq       string `json:"seq"`
			SessionID string `json:"sessionId"`
			Cause     string `json:"cause"`
			Events    string `json:"events"`
		} `json:"entries"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &log) != nil || len(log.Entries) != 1 ||
		log.Entries[0].SessionID != id || log.Entries[0].Cause != "operator" || log.Entries[0].Events != "3" {
		t.Fatalf("audit log -o json: code %d %s", code, out)
	}
	if code, out, _ := runCLI(t, addr, "fleet"); code != exitOK || !strings.Contains(out, "0 stopped, 1 purged") {
		t.Fatalf("fleet after the purge: code %d\n%s", code, out)
	}
}
