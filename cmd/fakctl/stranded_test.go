package main

import (
	"strings"
	"testing"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

func TestSessionCreateRecoverFlag(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newFakeFleet()
	url := fleet.start(t)
	code, _, errOut := runCLI(t, url, "session", "create", "--title", "pinned", "--recover", "manual")
	if code != exitOK {
		t.Fatalf("create: code %d stderr %q", code, errOut)
	}
	if got := fleet.lastCreate.GetPolicy().GetRecover(); got != "manual" {
		t.Errorf("policy recover sent = %q, want manual", got)
	}
}

func TestStrandedSessionsShowAsSuch(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 5, 0, 0, time.UTC)
	defer func(old func() time.Time) { timeNow = old }(timeNow)
	timeNow = func() time.Time { return now }
	fleet, url := describedFleet(t, now)
	runCLI(t, url, "session", "create", "--title", "second")
	fleet.mu.Lock()
	s1 := fleet.sessions["s-1"]
	s1.Stranded, s1.StrandedNode, s1.RecoverManual = true, "n2", true
	// A stopped session is never shown stranded.
	s2 := fleet.sessions["s-2"]
	s2.Stranded, s2.StrandedNode, s2.State = true, "n1", fakv1.SessionState_SESSION_STATE_STOPPED
	fleet.mu.Unlock()

	code, out, errOut := runCLI(t, url, "session", "list")
	var want strings.Builder
	writeTable(&want, []string{"ID", "TITLE", "STATE", "EPOCH", "NODE", "LEASE", "HEAD", "CREATED"}, [][]string{
		{"s-1", "demo", "active STRANDED", "1", "n2", "terminal alice", "9", formatTime(eventTime(0).UnixNano())},
		{"s-2", "second", "stopped", "1", "n1", "", "2", formatTime(eventTime(0).UnixNano())},
	})
	if code != exitOK || out != want.String() {
		t.Errorf("list: code %d stderr %q\n%s\nwant:\n%s", code, errOut, out, want.String())
	}

	code, out, errOut = runCLI(t, url, "session", "describe", "s-1")
	if code != exitOK {
		t.Fatalf("describe: code %d stderr %q", code, errOut)
	}
	for _, line := range []string{
		"Stranded:         yes (compute node n2 is dead; move it by hand: fakctl session move s-1 --to NODE)\n",
		"Recover:          manual (",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("describe output lacks %q:\n%s", line, out)
		}
	}
	code, out, _ = runCLI(t, url, "session", "describe", "s-2")
	if code != exitOK || strings.Contains(out, "Stranded:") {
		t.Errorf("describe of a stopped session shows it stranded: code %d\n%s", code, out)
	}
}
