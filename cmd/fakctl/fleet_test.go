package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/node/testcluster"
)

// TestAgainstARealFleet drives a one-node in-process fleet through a whole
// interaction — attachments, the input lease, input through Act, a runner's
// turn with a tool call and an approval, a steal, a detach — and checks that
// session log, describe, discover and list render the facts the real FSM
// writes. The session is placed on a node that does not exist, so no runner
// reacts to its input: the test writes the runner's events itself.
func TestAgainstARealFleet(t *testing.T) {
	fleet := oneNodeFleet(t)
	n1 := fleet.Nodes[0]
	addr := n1.APIAddr
	sessions := fleet.Sessions(n1)
	runner := fakv1connect.NewRunnerServiceClient(fleet.HTTPClient(), "http://"+addr,
		connect.WithInterceptors(apiclient.Bearer(testcluster.Token)))
	ctx := fleet.Context(time.Minute)

	code, out, errOut := runCLI(t, addr, "session", "create", "--title", "live", "--objective", "talk",
		"--node", "elsewhere", "--model", "m1")
	if code != exitOK {
		t.Fatalf("create: code %d stderr %q", code, errOut)
	}
	id := strings.TrimSpace(out)

	code, out, errOut = runCLI(t, addr, "session", "append", id, "--text", "a note")
	if want := "Appended " + id + " seq 3\n"; code != exitOK || out != want {
		t.Fatalf("append: code %d stdout %q stderr %q; want %q", code, out, errOut, want)
	}
	code, out, errOut = runCLI(t, addr, "session", "append", id, "--kind", "input", "--text", "sneaky")
	if code != exitError || out != "" || !strings.HasPrefix(errOut, "Error: INVALID_ARGUMENT: ") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("append --kind input: code %d stdout %q stderr %q", code, out, errOut)
	}

	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	attach := func(kind, name string) string {
		t.Helper()
		resp, err := sessions.Attach(ctx, connect.NewRequest(&fakv1.AttachRequest{
			SessionId: id, ClientKind: kind, ClientName: name, Capabilities: []string{"input.text", "approval.answer"},
		}))
		must("attach "+kind, err)
		return resp.Msg.GetAttachmentId()
	}
	runnerWrite := func(events ...*fakv1.EventInput) uint64 {
		t.Helper()
		resp, err := runner.AppendRunnerEvents(ctx, connect.NewRequest(&fakv1.AppendRunnerEventsRequest{
			SessionId: id, Epoch: 1, Events: events,
		}))
		must("runner append", err)
		return resp.Msg.GetLastSeq()
	}

	alice := attach("terminal", "alice")
	bob := attach("browser", "bob")
	_, err := sessions.TakeLease(ctx, connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: id, AttachmentId: alice}))
	must("take lease", err)
	act, err := sessions.Act(ctx, connect.NewRequest(&fakv1.ActRequest{
		SessionId: id, AttachmentId: alice, ExpectedEpoch: 1,
		Action: &fakv1.ActRequest_Input{Input: &fakv1.InputText{Text: "list the files"}},
	}))
	must("act", err)
	inputSeq := act.Msg.GetSeq()
	runnerWrite(
		&fakv1.EventInput{Kind: "turn.started", Text: "turn", Data: []byte(`{"input_seq":` + formatUint(inputSeq) + `}`)},
		&fakv1.EventInput{Kind: "output", Text: "Let me look."},
		&fakv1.EventInput{Kind: "tool.call", Text: "ls", Data: []byte(`{"tool":"shell"}`)},
	)
	approvalSeq := runnerWrite(&fakv1.EventInput{Kind: "approval.requested", Text: "may I run ls?"})

	// Mid-turn, as bob sees it: alice holds the lease, an approval waits.
	code, out, errOut = runCLI(t, addr, "session", "describe", id, "--attachment", bob)
	if code != exitOK {
		t.Fatalf("describe: code %d stderr %q", code, errOut)
	}
	for _, re := range []string{
		`(?m)^State: +active$`,
		`(?m)^Epoch: +1$`,
		`(?m)^Placement: +echo on elsewhere, model m1$`,
		`(?m)^Compute node: +elsewhere$`,
		`(?m)^Running turn: +on the input at seq ` + formatUint(inputSeq) + `$`,
		`(?m)^Pending approval: +awaiting an answer to the request at seq ` + formatUint(approvalSeq) + `$`,
		`(?m)^Lease: +terminal alice \(` + alice + `\), taken [0-9:.]+, expires [0-9:.]+ \(in 1[0-5]s\)$`,
		`(?m)^Attachments \(2\):$`,
		`(?m)^` + alice + ` +terminal alice +n1 +yes +holder `,
		`(?m)^` + bob + ` +browser bob +n1 +yes +- `,
		`(?m)^Controls \(capability set v[1-9][0-9]*, as seen by attachment ` + bob + `\):$`,
		`(?m)^input\.text +no +LEASE_NOT_HELD +the input lease is held by terminal alice +lease\.steal$`,
		`(?m)^lease\.steal +yes +- +- +-$`,
		`(?m)^approval\.answer +yes `,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("describe output does not match %s:\n%s", re, out)
		}
	}

	_, err = sessions.AnswerApproval(ctx, connect.NewRequest(&fakv1.AnswerApprovalRequest{
		SessionId: id, AttachmentId: bob, ApprovalSeq: approvalSeq, Approved: true, Note: "fine",
	}))
	must("answer approval", err)
	runnerWrite(
		&fakv1.EventInput{Kind: "tool.result", Text: "a b", Data: []byte(`{"tool":"shell","exit":0}`)},
		&fakv1.EventInput{Kind: "turn.completed"},
	)
	_, err = sessions.TakeLease(ctx, connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: id, AttachmentId: bob, Steal: true}))
	must("steal lease", err)
	_, err = sessions.Detach(ctx, connect.NewRequest(&fakv1.DetachRequest{SessionId: id, AttachmentId: alice}))
	must("detach", err)
	_, err = sessions.ReleaseLease(ctx, connect.NewRequest(&fakv1.ReleaseLeaseRequest{SessionId: id, AttachmentId: bob}))
	must("release lease", err)

	code, out, errOut = runCLI(t, addr, "session", "log", id)
	if code != exitOK {
		t.Fatalf("log: code %d stderr %q", code, errOut)
	}
	want := []string{
		`session.created  session created: live`,
		`epoch.changed  epoch 1: echo on elsewhere, model m1`,
		`note  note: a note`,
		`attachment.joined  terminal alice joined via n1`,
		`attachment.joined  browser bob joined via n1`,
		`lease.taken  lease taken by terminal alice`,
		`input  terminal alice> list the files`,
		`turn.started  turn started for input #` + formatUint(inputSeq) + ` \(turn\)`,
		`output  agent> Let me look.`,
		`tool.call  tool call: shell ls`,
		`approval.requested  approval requested: may I run ls\?`,
		`approval.answered  approval #` + formatUint(approvalSeq) + ` approved by browser bob: fine`,
		`tool.result  tool result: a b`,
		`turn.completed  turn completed`,
		`lease.taken  lease taken by browser bob \(stolen from terminal alice\)`,
		`attachment.left  terminal alice left \(detached\)`,
		`lease.released  lease released by browser bob \(released\)`,
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("log has %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, line := range lines {
		re := `^` + formatUint(uint64(i+1)) + `  \d\d:\d\d:\d\d\.\d\d\d  ` + want[i] + `$`
		if !regexp.MustCompile(re).MatchString(line) {
			t.Errorf("log line %d:\n  %s\ndoes not match\n  %s", i+1, line, re)
		}
	}

	code, out, errOut = runCLI(t, addr, "session", "discover", id)
	for _, re := range []string{
		`(?m)^Compute node: +elsewhere$`,
		`(?m)^Epoch: +1$`,
		`(?m)^n1 +` + regexp.QuoteMeta(addr) + ` +leader +alive$`,
	} {
		if code != exitOK || !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("discover: code %d stderr %q; output does not match %s:\n%s", code, errOut, re, out)
		}
	}

	code, out, errOut = runCLI(t, addr, "session", "list")
	row := `(?m)^` + id + ` +live +active +1 +elsewhere +- +` + formatUint(uint64(len(want))) + ` `
	if code != exitOK || !regexp.MustCompile(row).MatchString(out) {
		t.Errorf("list: code %d stderr %q; output does not match %s:\n%s", code, errOut, row, out)
	}

	// An observer sees every attachment control as needing an attachment.
	code, out, _ = runCLI(t, addr, "session", "describe", id)
	if code != exitOK || !regexp.MustCompile(`(?m)^input\.text +no +NOT_ATTACHED +`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^Lease: +none \(free to take\)$`).MatchString(out) {
		t.Errorf("describe as an observer:\n%s", out)
	}
}
