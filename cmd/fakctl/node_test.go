package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

func TestNodeList(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newMoveFleet()
	url := fleet.start(t)
	code, out, _ := runCLI(t, url, "node", "list")
	if code != exitOK || out != "no node records\n" {
		t.Errorf("no nodes: code %d stdout %q", code, out)
	}
	fleet.nodes = testNodes()
	fleet.sessions = []*fakv1.Session{
		{SessionId: "s-1", State: fakv1.SessionState_SESSION_STATE_ACTIVE, Placement: &fakv1.Placement{Node: "n2"}},
		{SessionId: "s-2", State: fakv1.SessionState_SESSION_STATE_ACTIVE, Placement: &fakv1.Placement{Node: "n2"}},
	}
	code, out, errOut := runCLI(t, url, "node", "list")
	if code != exitOK {
		t.Fatalf("node list: code %d stderr %q", code, errOut)
	}
	want := [][]string{
		{"n1", "alive", "0/unlimited", "no", "echo", "", "", "", ""},
		{"n2", "alive", "2/10 (1 moving)", "no", "echo,exec", "anthropic", "m1,m2", "rack=b,zone=z1", "claude=gateway,codex=cli"},
		{"n3", "dead", "0/unlimited", "yes", "echo", "", "", "", ""},
	}
	var b strings.Builder
	writeTable(&b, []string{"NAME", "STATUS", "SESSIONS", "DRAINING", "ADAPTERS", "PROVIDERS", "MODELS", "LABELS", "METERED"}, want)
	if out != b.String() {
		t.Errorf("node list:\n%s\nwant:\n%s", out, b.String())
	}
	code, out, _ = runCLI(t, url, "-o", "json", "node", "list")
	var resp fakv1.ListNodesResponse
	if err := protojson.Unmarshal([]byte(out), &resp); code != exitOK || err != nil || len(resp.GetNodes()) != 3 || resp.GetNodes()[0].GetName() != "n1" {
		t.Errorf("node list -o json: code %d err %v\n%s", code, err, out)
	}
}

func TestNodeDrainShowsEachSessionLeaving(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	defer func(d time.Duration) { drainPoll = d }(drainPoll)
	drainPoll = 5 * time.Millisecond
	fleet := newMoveFleet()
	fleet.nodes = testNodes()
	active := fakv1.SessionState_SESSION_STATE_ACTIVE
	fleet.sessions = []*fakv1.Session{
		{SessionId: "s-1", State: active, Epoch: 2, Placement: &fakv1.Placement{Node: "n1"}},
		{SessionId: "s-2", State: active, Epoch: 4, Placement: &fakv1.Placement{Node: "n1"}},
		{SessionId: "s-3", State: active, Epoch: 1, Placement: &fakv1.Placement{Node: "n1"}},
		{SessionId: "s-4", State: active, Epoch: 1, Placement: &fakv1.Placement{Node: "n2"}},
	}
	url := fleet.start(t)
	code, out, errOut := runCLI(t, url, "node", "drain", "n1")
	if code != exitOK || errOut != "" {
		t.Fatalf("drain: code %d stderr %q\n%s", code, errOut, out)
	}
	if len(fleet.drains) != 1 || fleet.drains[0].GetNode() != "n1" || !fleet.drains[0].GetDraining() {
		t.Errorf("DrainNode calls %v", fleet.drains)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{
		`^Node n1 is draining: no new sessions; 3 sessions to move away$`,
		`^ +\d+ms  s-1 not moved yet: MOVE_FAILED: digest mismatch \(in DESTINATION_ADMITTED\)$`,
		`^ +\d+ms  s-1 moved n1 → n2 \(epoch 3\)$`,
		`^ +\d+ms  s-2 moved n1 → n2 \(epoch 5\)$`,
		`^ +\d+ms  s-3 stopped \(done\)$`,
		`^Node n1 is drained: 2 sessions moved in \S+; it stays draining until fakctl node undrain n1$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %s", i, lines[i], re)
		}
	}

	code, out, _ = runCLI(t, url, "node", "undrain", "n1")
	if code != exitOK || out != "Node n1 is not draining: it admits sessions again (hosts 0/unlimited)\n" {
		t.Errorf("undrain: code %d stdout %q", code, out)
	}
	if last := fleet.drains[len(fleet.drains)-1]; last.GetDraining() {
		t.Errorf("undrain sent draining=true")
	}
	code, _, errOut = runCLI(t, url, "node", "drain", "n9")
	if code != exitError || errOut != "Error: NOT_FOUND: node n9 not found\n" {
		t.Errorf("drain unknown: code %d stderr %q", code, errOut)
	}
}

func TestNodeDrainTimesOut(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	defer func(d time.Duration) { drainPoll = d }(drainPoll)
	drainPoll = 5 * time.Millisecond
	fleet := newMoveFleet()
	fleet.nodes = testNodes()
	// A session on n3, which ListSessions never moves.
	fleet.sessions = []*fakv1.Session{{SessionId: "s-9", State: fakv1.SessionState_SESSION_STATE_ACTIVE, Placement: &fakv1.Placement{Node: "n3"}}}
	// The leader's controller finds no node for it, and says why (once).
	fleet.blocked = map[string]string{"s-9": "n1 refused: capacity: hosts 2 of 2 sessions | n2 refused: alive: gossip says dead"}
	url := fleet.start(t)
	code, out, errOut := runCLI(t, url, "node", "drain", "n3", "--timeout", "100ms")
	if code != exitError || errOut != "Error: node n3 still hosts 1 session after 100ms; it stays draining (fakctl node list)\n" {
		t.Errorf("drain timeout: code %d stdout %q stderr %q", code, out, errOut)
	}
	if !regexp.MustCompile(`(?m)\A.*\n +\d+ms  s-9 waits: no node admits it: n1 refused: capacity: hosts 2 of 2 sessions \| n2 refused: alive: gossip says dead\n\z`).MatchString(out) {
		t.Errorf("drain output %q: want the blocked session's refusals, once", out)
	}
	code, out, _ = runCLI(t, url, "node", "drain", "n3", "--no-wait")
	if code != exitOK || out != "Node n3 is draining: no new sessions; 1 session to move away\n" {
		t.Errorf("drain --no-wait: code %d stdout %q", code, out)
	}
}
