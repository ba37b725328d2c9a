package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/node/testcluster"
)

// TestLedgerAgainstARealFleet drives the reset ledger through fakctl on a
// one-node in-process fleet: a budgeted session is charged, refreshed,
// reset (refused with BUSY while a turn runs), cleared — and its child is
// refused past what the lineage has left — renewed and forked; lineage,
// describe and log show what happened, and usage through a guarded launch
// reaches its default session. The session is placed on a node that does
// not exist, so the test plays the runner itself.
func TestLedgerAgainstARealFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an in-process fleet; skipped with -short")
	}
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testcluster.Token)
	fleet := testcluster.New(t, testcluster.Options{Nodes: 1})
	n1 := fleet.Nodes[0]
	addr := n1.APIAddr
	sessions := fleet.Sessions(n1)
	opts := connect.WithInterceptors(apiclient.Bearer(testcluster.Token))
	runner := fakv1connect.NewRunnerServiceClient(fleet.HTTPClient(), "http://"+addr, opts)
	lifecycle := fakv1connect.NewLifecycleServiceClient(fleet.HTTPClient(), "http://"+addr, opts)
	ctx := fleet.Context(2 * time.Minute)

	ok := func(what string, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, addr, args...)
		if code != exitOK || errOut != "" {
			t.Fatalf("%s: code %d stderr %q\nstdout:\n%s", what, code, errOut, out)
		}
		return out
	}
	fails := func(what, wantErr string, args ...string) {
		t.Helper()
		code, out, errOut := runCLI(t, addr, args...)
		if code != exitError || out != "" || !regexp.MustCompile(`^Error: `+wantErr+`\n$`).MatchString(errOut) {
			t.Fatalf("%s: code %d stdout %q stderr %q; want exit 1 and one line matching %q", what, code, out, errOut, wantErr)
		}
	}
	matches := func(what, out string, res ...string) {
		t.Helper()
		for _, re := range res {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("%s does not match %s:\n%s", what, re, out)
			}
		}
	}
	childOf := func(out string) string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^Session: +(\S+) \(the new session, now in force\)$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no new session in:\n%s", out)
		}
		return m[1]
	}

	root := strings.TrimSpace(ok("create", "session", "create", "--title", "budgeted", "--objective", "ship it", "--node", "elsewhere",
		"--max-spend", "1.00", "--max-turns", "10", "--context-cap", "1000", "--priority", "high"))

	// Spend 95% of the spend axis.
	out := ok("usage record", "usage", "record", "--session", root, "--spend", "0.95", "--output-tokens", "100", "--queries", "1", "--context-tokens", "400")
	matches("usage record", out,
		`(?m)^Charged: +`+root+`$`,
		`(?m)^Context: +400 of 1000 tokens used \(600 left\)$`,
		`(?m)^Budget \(envelope \S+, shared by 1 session, \S+ elapsed, 0 refusals, priority high\):$`,
		`(?m)^spend +1 +0\.95 +0\.05$`,
		`(?m)^output tokens +unlimited +100 +-$`,
		`(?m)^turns +10 +0 +10$`)

	out = ok("describe", "session", "describe", root)
	matches("describe", out,
		`(?m)^Context: +400 of 1000 tokens used \(600 left\)$`,
		`(?m)^Context reset: +none$`,
		`(?m)^Lineage: +root \(no parent\)$`,
		`(?m)^spend +1 +0\.95 +0\.05$`,
		`(?m)^session\.fresh +yes `, `(?m)^session\.reset +yes `, `(?m)^session\.clear +yes `,
		`(?m)^session\.new +yes `, `(?m)^session\.fork +yes `)

	out = ok("fresh", "session", "fresh", root)
	matches("fresh", out,
		`(?m)^Action: +fresh$`,
		`(?m)^Session: +`+root+` \(same session\)$`,
		`(?m)^Pruned: +0 cached provider entries \(0 is normal\)$`,
		`(?m)^Epoch: +2$`,
		`(?m)^Provider session: +fak_\S+$`)

	// A turn in flight: reset is refused with BUSY until it completes.
	att, err := sessions.Attach(ctx, connect.NewRequest(&fakv1.AttachRequest{SessionId: root, ClientKind: "terminal", ClientName: "t"}))
	if err != nil {
		t.Fatal(err)
	}
	attID := att.Msg.GetAttachmentId()
	if _, err := sessions.TakeLease(ctx, connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: root, AttachmentId: attID})); err != nil {
		t.Fatal(err)
	}
	act, err := sessions.Act(ctx, connect.NewRequest(&fakv1.ActRequest{SessionId: root, AttachmentId: attID, ExpectedEpoch: 2,
		Action: &fakv1.ActRequest_Input{Input: &fakv1.InputText{Text: "work"}}}))
	if err != nil {
		t.Fatal(err)
	}
	inputSeq := act.Msg.GetSeq()
	runnerWrite := func(events ...*fakv1.EventInput) {
		t.Helper()
		if _, err := runner.AppendRunnerEvents(ctx, connect.NewRequest(&fakv1.AppendRunnerEventsRequest{SessionId: root, Epoch: 2, Events: events})); err != nil {
			t.Fatal(err)
		}
	}
	runnerWrite(&fakv1.EventInput{Kind: "turn.started", Data: []byte(`{"input_seq":` + formatUint(inputSeq) + `}`)})
	fails("reset during a turn", `BUSY: a turn is in flight \(input #`+formatUint(inputSeq)+`\); reset when it completes`, "session", "reset", root)
	matches("describe during a turn", ok("describe", "session", "describe", root),
		`(?m)^session\.reset +no +BUSY +a turn is in flight; reset when it completes +-$`)
	runnerWrite(&fakv1.EventInput{Kind: "turn.completed", Data: []byte(`{"status":"completed"}`)})
	out = ok("reset", "session", "reset", root)
	matches("reset", out,
		`(?m)^Action: +reset$`,
		`(?m)^Context: +0 of 1000 tokens used \(1000 left\)$`,
		`(?m)^Context reset: +at seq \d+ \(the model context starts after it\)$`)

	// Clear: the child shares the envelope, so it has 0.05 left, not 1.00.
	out = ok("clear", "session", "clear", root, "--request-id", "ledger-test-clear")
	child := childOf(out)
	matches("clear", out,
		`(?m)^Action: +clear$`,
		`(?m)^Previous session: +`+root+`$`,
		`(?m)^State: +active$`,
		`(?m)^Lineage: +clear of `+root+`$`,
		`(?m)^Head: +3 `)
	if again := ok("clear again", "session", "clear", root, "--request-id", "ledger-test-clear"); again != out {
		t.Errorf("a retried clear answered differently:\n%s\nfirst:\n%s", again, out)
	}
	fails("the cleared session charged", `SESSION_STOPPED: .*`, "usage", "record", "--session", root, "--queries", "1")
	fails("the child past the rest", `BUDGET_EXHAUSTED: spend_micros budget of session `+child+` is exhausted`,
		"usage", "record", "--session", child, "--spend", "0.10")
	out = ok("the child within the rest", "usage", "record", "--session", child, "--spend", "0.05", "--context-tokens", "10")
	matches("usage record on the child", out,
		`(?m)^Charged: +`+child+`$`,
		`(?m)^Context: +10 of 1000 tokens used \(990 left\)$`,
		`(?m)^Budget \(envelope \S+, shared by 2 sessions, \S+ elapsed, 1 refusal, priority high\):$`,
		`(?m)^spend +1 +1 +0 \(exhausted\)$`)

	out = ok("new", "session", "new", child)
	grandchild := childOf(out)
	matches("new", out, `(?m)^Action: +new$`, `(?m)^Lineage: +new of `+child+`$`)
	forkOfRoot := childOf(ok("fork", "session", "fork", root, "--at", "3"))
	out = ok("fork the grandchild", "session", "fork", grandchild)
	fork := childOf(out)
	matches("fork", out, `(?m)^Action: +fork$`, `(?m)^Lineage: +fork of `+grandchild+` at seq 3$`, `(?m)^Head: +4 `)
	fails("fork past the head", `INVALID_ARGUMENT: fork address #99 is past the head #\d+`, "session", "fork", grandchild, "--at", "99")
	fails("fresh of an unknown session", `NOT_FOUND: .*`, "session", "fresh", "ses_nope")
	fails("reset of a stopped session", `SESSION_STOPPED: .*`, "session", "reset", root)

	// The lineage, asked from anywhere in it, is the tree from the root.
	out = ok("lineage", "session", "lineage", fork)
	want := []string{
		`SESSION +SOURCE +AT +STATE +STOP REASON +HEAD +TITLE`,
		regexp.QuoteMeta(root) + ` +- +- +stopped +USER_CLEAR +\d+ +budgeted`,
		`├─ ` + child + ` +clear +- +stopped +USER_NEW +\d+ +budgeted`,
		`│  └─ ` + grandchild + ` +new +- +active +- +\d+ +budgeted`,
		`│     └─ ` + fork + ` +fork +3 +active +- +4 +budgeted`,
		`└─ ` + forkOfRoot + ` +fork +3 +active +- +4 +budgeted`,
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("lineage has %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, re := range want {
		if !regexp.MustCompile(`^` + re + `$`).MatchString(lines[i]) {
			t.Errorf("lineage line %d %q does not match %s", i, lines[i], re)
		}
	}
	var tree fakv1.GetLineageResponse
	if err := protojson.Unmarshal([]byte(ok("lineage -o json", "-o", "json", "session", "lineage", child)), &tree); err != nil {
		t.Fatal(err)
	}
	if tree.GetRoot() != root || len(tree.GetNodes()) != 5 {
		t.Errorf("lineage -o json: root %s, %d nodes", tree.GetRoot(), len(tree.GetNodes()))
	}

	matches("describe the grandchild", ok("describe", "session", "describe", grandchild),
		`(?m)^Lineage: +new of `+child+`$`,
		`(?m)^Objective: +-$`,
		`(?m)^Budget \(envelope \S+, shared by 5 sessions, \S+ elapsed, 1 refusal, priority high\):$`)
	matches("log of the root", ok("log", "session", "log", root),
		`(?m)^\d+  \S+  epoch\.changed  epoch 2: echo on elsewhere \(fresh: provider session fak_\S+, 0 cached provider entries pruned\)$`,
		`(?m)^\d+  \S+  budget\.charged  charged 100 output tokens, 1 query, spend 0\.95; context \+400 tokens$`,
		`(?m)^\d+  \S+  reset_boundary  context reset: the agent's context starts after this point; provider session fak_\S+; context re-armed to 1000 tokens$`,
		`(?m)^\d+  \S+  session\.stopped  session stopped: USER_CLEAR; continues as `+child+` \(clear\)$`)
	matches("log of the child", ok("log", "session", "log", child),
		`(?m)^3  \S+  fak\.session\.provider_boundary\.v1  clear of `+root+` \(provider session fak_ledger-test-clear\)$`,
		`(?m)^\d+  \S+  budget\.exhausted  budget exhausted: spend; refused spend 0\.1$`,
		`(?m)^\d+  \S+  budget\.charged  charged spend 0\.05; context \+10 tokens$`)
	matches("log of the fork", ok("log", "session", "log", fork),
		`(?m)^4  \S+  session\.forked  forked from `+grandchild+` at #3 \(3 events copied\)$`)

	// A guarded launch: usage without a trace id goes to its default session.
	bound, err := lifecycle.BindLaunch(ctx, connect.NewRequest(&fakv1.BindLaunchRequest{LaunchId: "launch-1", Provider: "claude", SessionId: grandchild}))
	if err != nil {
		t.Fatal(err)
	}
	if bound.Msg.GetSession().GetSessionId() != grandchild {
		t.Fatalf("bound %s", bound.Msg.GetSession().GetSessionId())
	}
	matches("launch describe", ok("launch describe", "launch", "describe", "launch-1"),
		`(?m)^Launch: +launch-1$`, `(?m)^Provider: +claude$`, `(?m)^Default session: +`+grandchild+`$`)
	matches("usage record --launch", ok("usage record --launch", "usage", "record", "--launch", "launch-1", "--output-tokens", "2"),
		`(?m)^Charged: +`+grandchild+` \(the default session of launch launch-1\)$`)
	// Its shared envelope has no spend left: a query may not start
	// (fsm.MayStart), whichever axis it would charge.
	fails("usage record --launch", `BUDGET_EXHAUSTED: spend_micros budget of session `+grandchild+` is exhausted`,
		"usage", "record", "--launch", "launch-1", "--queries", "2")
	fails("describe an unknown launch", `NOT_FOUND: .*`, "launch", "describe", "launch-nope")
	code, _, errOut := runCLI(t, addr, "usage", "record", "--queries", "1")
	if code != exitUsage || !strings.HasPrefix(errOut, "Error: exactly one of --session and --launch is required\n") {
		t.Errorf("usage record without a target: code %d stderr %q", code, errOut)
	}
}
