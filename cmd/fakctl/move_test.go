package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

func TestSessionMovePrintsEachTransition(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newMoveFleet()
	fleet.script = successScript()
	url := fleet.start(t)

	code, out, errOut := runCLI(t, url, "session", "move", "s-1", "--to", "n2")
	if code != exitOK || errOut != "" {
		t.Fatalf("move: code %d stderr %q\n%s", code, errOut, out)
	}
	req := fleet.moveReq
	if req.GetSessionId() != "s-1" || req.GetToNode() != "n2" || req.GetSafePointTimeoutMs() != 30000 || req.GetAcceptDegradation() {
		t.Errorf("MoveSession request %v", req)
	}
	if len(fleet.watchers) != 1 || fleet.watchers[0] != 5 {
		t.Errorf("WatchEvents after %v, want the head before the request (5)", fleet.watchers)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{
		`^Move mov_1 of s-1: n1 \(epoch 2\) → n2$`,
		`^ +\d+ms  SAFE_POINT_REQUESTED$`,
		`^ +\d+ms  CHECKPOINTED at #6$`,
		`^ +\d+ms  DESTINATION_ADMITTED n2 \(alive, not_draining, capacity, adapter, provider, model, account_ref, budget, labels, degradation\)$`,
		`^ +\d+ms  RESTORED epoch 3 on n2$`,
		`^ +\d+ms  CUTOVER_COMMITTED n1 → n2$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %s", i, lines[i], re)
		}
	}
	// The times are the fleet's commit times since it committed the request,
	// plus the request's round trip.
	base := msOf(t, lines[1])
	for i, after := range []int{18, 19, 33, 34} {
		if got := msOf(t, lines[i+2]) - base; got != after {
			t.Errorf("line %q is %dms after the request's commit, want %d", lines[i+2], got, after)
		}
	}

	// -o json: only the final move.
	fleet2 := newMoveFleet()
	fleet2.script = successScript()
	url2 := fleet2.start(t)
	code, out, errOut = runCLI(t, url2, "-o", "json", "session", "move", "s-1", "--to", "n2", "--safe-point-timeout", "2s")
	if code != exitOK || errOut != "" {
		t.Fatalf("move -o json: code %d stderr %q", code, errOut)
	}
	var got fakv1.Move
	if err := protojson.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("move -o json is not a Move: %v\n%s", err, out)
	}
	if got.GetState() != moveCutoverCommitted || got.GetNewEpoch() != 3 || got.GetMoveId() != "mov_1" {
		t.Errorf("move -o json: %v", &got)
	}
	if fleet2.moveReq.GetSafePointTimeoutMs() != 2000 {
		t.Errorf("--safe-point-timeout 2s sent %d ms", fleet2.moveReq.GetSafePointTimeoutMs())
	}
}

func TestSessionMoveFailures(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)

	// A refused destination: exit 1, the transition on stdout, the reason on
	// one line of stderr.
	fleet := newMoveFleet()
	fleet.script = []moveStep{
		{"move.checkpointed", 3 * time.Millisecond, map[string]any{"move_id": "mov_1", "state": moveCheckpointed, "checkpoint_seq": 6}},
		{"move.failed", 4 * time.Millisecond, map[string]any{"move_id": "mov_1", "state": moveFailed, "phase": moveCheckpointed,
			"reason": "n3 refused: alive: gossip says dead; not_draining: the node is draining"}},
	}
	url := fleet.start(t)
	code, out, errOut := runCLI(t, url, "session", "move", "s-1", "--to", "n3")
	if code != exitError || errOut != "Error: MOVE_FAILED: n3 refused: alive: gossip says dead; not_draining: the node is draining (in CHECKPOINTED)\n" {
		t.Errorf("failed move: code %d stderr %q", code, errOut)
	}
	if !regexp.MustCompile(`(?m)^ +\d+ms  MOVE_FAILED in CHECKPOINTED: n3 refused: alive: gossip says dead; not_draining: the node is draining$`).MatchString(out) {
		t.Errorf("failed move stdout:\n%s", out)
	}

	// No safe point in time.
	fleet = newMoveFleet()
	fleet.script = []moveStep{{"move.unsafe", time.Second, map[string]any{"move_id": "mov_1", "state": moveUnsafe, "phase": moveSafePointRequested,
		"reason": "no safe point within 1s (a turn is in flight)"}}}
	url = fleet.start(t)
	code, _, errOut = runCLI(t, url, "session", "move", "s-1", "--safe-point-timeout", "1s")
	if code != exitError || errOut != "Error: MOVE_UNSAFE: no safe point within 1s (a turn is in flight) (in SAFE_POINT_REQUESTED)\n" {
		t.Errorf("unsafe move: code %d stderr %q", code, errOut)
	}

	// Refusals of the request itself.
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fakeError(connect.CodeFailedPrecondition, "BUSY", "move mov_0 of session s-1 is in progress (CHECKPOINTED)"),
			"Error: BUSY: move mov_0 of session s-1 is in progress (CHECKPOINTED)\n"},
		{fakeError(connect.CodeNotFound, "NOT_FOUND", "node n9 not found (no node record; fakctl node list shows the nodes)"),
			"Error: NOT_FOUND: node n9 not found (no node record; fakctl node list shows the nodes)\n"},
		{fakeError(connect.CodeFailedPrecondition, "SESSION_STOPPED", "session s-1 is stopped (done)"),
			"Error: SESSION_STOPPED: session s-1 is stopped (done)\n"},
	} {
		fleet = newMoveFleet()
		fleet.moveErr = tt.err
		url = fleet.start(t)
		code, out, errOut = runCLI(t, url, "session", "move", "s-1", "--to", "n9")
		if code != exitError || out != "" || errOut != tt.want {
			t.Errorf("refused move: code %d stdout %q stderr %q; want %q", code, out, errOut, tt.want)
		}
	}
	code, _, errOut = runCLI(t, url, "session", "move", "s-404")
	if code != exitError || errOut != "Error: NOT_FOUND: session s-404 not found\n" {
		t.Errorf("unknown session: code %d stderr %q", code, errOut)
	}

	// A move nothing drives: fakctl gives up waiting, the move goes on.
	fleet = newMoveFleet()
	url = fleet.start(t)
	code, _, errOut = runCLI(t, url, "session", "move", "s-1", "--timeout", "300ms")
	if code != exitError || errOut != "Error: move mov_1 is still SAFE_POINT_REQUESTED after 300ms; it goes on: fakctl session move-status s-1\n" {
		t.Errorf("stuck move: code %d stderr %q", code, errOut)
	}

	// Usage errors.
	if code, _, _ := runCLI(t, url, "session", "move", "s-1", "--safe-point-timeout", "0s"); code != exitUsage {
		t.Errorf("--safe-point-timeout 0s: code %d, want %d", code, exitUsage)
	}
	if code, _, _ := runCLI(t, url, "session", "move"); code != exitUsage {
		t.Errorf("no session: code %d, want %d", code, exitUsage)
	}
}

// TestSessionMoveRetryFollowsTheSameMove: with --request-id the move's
// events may be older than the head, so the watch reads the whole journal.
func TestSessionMoveRetryFollowsTheSameMove(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newMoveFleet()
	fleet.script = successScript()
	url := fleet.start(t)
	if code, _, errOut := runCLI(t, url, "session", "move", "s-1", "--to", "n2", "--request-id", "r1"); code != exitOK {
		t.Fatalf("move: code %d stderr %q", code, errOut)
	}
	if len(fleet.watchers) != 1 || fleet.watchers[0] != 0 {
		t.Errorf("WatchEvents after %v, want 0", fleet.watchers)
	}
	if fleet.moveReq.GetRequestId() != "r1" {
		t.Errorf("request id %q", fleet.moveReq.GetRequestId())
	}
}

func TestSessionMoveStatus(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newMoveFleet()
	url := fleet.start(t)
	code, out, errOut := runCLI(t, url, "session", "move-status", "s-1")
	if code != exitOK || out != "Move: none (session s-1 has not been moved)\n" {
		t.Errorf("no move: code %d stdout %q stderr %q", code, out, errOut)
	}

	fleet.move = &fakv1.Move{MoveId: "mov_1", SessionId: "s-1", State: moveFailed, Cause: "drain",
		Target: &fakv1.Placement{}, SourceNode: "n1", SourceEpoch: 2, CheckpointSeq: 41, Digest: strings.Repeat("0f", 32),
		Reason: "n2 refused: capacity: hosts 4 of 4 sessions", Phase: moveCheckpointed,
		RequestedUnixNano: moveT0, StateUnixNano: moveT0 + int64(12*time.Millisecond)}
	code, out, errOut = runCLI(t, url, "session", "move-status", "s-1")
	if code != exitOK {
		t.Fatalf("move-status: code %d stderr %q", code, errOut)
	}
	for _, re := range []string{
		`(?m)^Move: +mov_1$`,
		`(?m)^State: +MOVE_FAILED$`,
		`(?m)^Cause: +drain$`,
		`(?m)^From: +n1 \(epoch 2\)$`,
		`(?m)^Requested: +any admitted node$`,
		`(?m)^Checkpoint: +at seq 41 \(digest 0f0f0f0f0f0f…\)$`,
		`(?m)^Degradation: +none$`,
		`(?m)^Reason: +n2 refused: capacity: hosts 4 of 4 sessions$`,
		`(?m)^Failed in: +CHECKPOINTED$`,
		`(?m)^Last transition: +\S+ \(12ms after the request\)$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("move-status does not match %s:\n%s", re, out)
		}
	}
	fleet.move.State, fleet.move.Reason, fleet.move.Phase = moveAdmitted, "", ""
	fleet.move.Target = &fakv1.Placement{Node: "n2", Model: "m2"}
	fleet.move.Admitted = &fakv1.Placement{RuntimeAdapter: "echo", Node: "n2", Model: "m2"}
	fleet.move.Degradation, fleet.move.AcceptDegradation = []string{`model "m1" → "m2": the provider cache starts cold`}, true
	fleet.move.Checks = []string{"alive", "capacity"}
	_, out, _ = runCLI(t, url, "session", "move-status", "s-1")
	for _, re := range []string{
		`(?m)^State: +DESTINATION_ADMITTED \(in progress\)$`,
		`(?m)^Requested: +n2, model m2$`,
		`(?m)^Admitted: +echo on n2, model m2$`,
		`(?m)^Checks passed: +alive, capacity$`,
		`(?m)^Degradation: +model "m1" → "m2": the provider cache starts cold \(accepted\)$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("move-status does not match %s:\n%s", re, out)
		}
	}
	if strings.Contains(out, "Reason:") {
		t.Errorf("an open move shows a reason:\n%s", out)
	}
	code, out, _ = runCLI(t, url, "-o", "json", "session", "move-status", "s-1")
	var resp fakv1.GetMoveResponse
	if err := protojson.Unmarshal([]byte(out), &resp); code != exitOK || err != nil || resp.GetMove().GetMoveId() != "mov_1" {
		t.Errorf("move-status -o json: code %d err %v\n%s", code, err, out)
	}
}
