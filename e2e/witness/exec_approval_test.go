package witness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// TestExecApprovalFromThePage: a real program runs as a session's agent
// (the exec runtime, fak runtime protocol v1) and asks to run a tool; the
// approval is answered by clicking in the browser page on another node,
// and the program, told the answer on its stdin, does the work in the
// session's workspace.
func TestExecApprovalFromThePage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster and a headless Chromium; skipped with -short")
	}
	browser := findBrowser(t)
	shots := artifactsDir(t)
	agent, err := filepath.Abs("../../node/runner/exec/testdata/tool_agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	c := testcluster.New(t, testcluster.Options{Configure: func(name string, cfg *node.Config) {
		cfg.Runtimes = append(cfg.Runtimes, node.RuntimeConfig{Name: "tool-agent", Adapter: node.AdapterExec,
			Protocol: "jsonl", Command: []string{agent}})
	}})
	n1, n2 := c.Nodes[0], c.Nodes[1]
	ctx := c.Context(30 * time.Second)
	s := c.Sessions(n1)
	created, err := s.CreateSession(ctx, connect.NewRequest(&fakv1.CreateSessionRequest{Title: "exec approval",
		Placement: &fakv1.Placement{RuntimeAdapter: "tool-agent", Node: n1.Name}}))
	if err != nil {
		t.Fatal(err)
	}
	id := created.Msg.Session.SessionId

	// The browser on node 2 attaches first, so it is there when the
	// approval comes.
	p := openPage(t, browser, shots)
	p.do("open the session on node 2",
		chromedp.Navigate(pageURL(n2)),
		chromedp.WaitVisible(sel(`#session-list tr[data-session-id=%q]`, id)),
		chromedp.SetValue(chromedp.CSS("#client-name"), browserName),
		chromedp.Click(sel(`#session-list tr[data-session-id=%q] td:nth-child(2)`, id)),
		chromedp.WaitVisible(chromedp.CSS(`#transcript [data-seq="2"]`)),
	)

	// A terminal-like client on node 1 holds the lease and sends input.
	att, err := s.Attach(ctx, connect.NewRequest(&fakv1.AttachRequest{SessionId: id, ClientKind: "terminal", ClientName: "alice"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeLease(ctx, connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: id, AttachmentId: att.Msg.AttachmentId})); err != nil {
		t.Fatal(err)
	}
	in, err := s.Act(ctx, connect.NewRequest(&fakv1.ActRequest{SessionId: id, AttachmentId: att.Msg.AttachmentId, ExpectedEpoch: 1,
		Action: &fakv1.ActRequest_Input{Input: &fakv1.InputText{Text: "make the file"}}}))
	if err != nil {
		t.Fatal(err)
	}
	p.do("approve the program's tool from the page",
		chromedp.WaitEnabled(chromedp.CSS("#transcript .approval button.approve")),
		chromedp.Click(chromedp.CSS("#transcript .approval button.approve")),
	)
	events := waitTurns(t, c, n2, id, 1)
	approval := kindAfter(t, events, "approval.requested", in.Msg.Seq)
	result := kindAfter(t, events, "tool.result", in.Msg.Seq)
	head := events[len(events)-1].Seq
	p.do("see the approval answered and the turn complete",
		chromedp.WaitVisible(sel(`#transcript .approval[data-seq="%d"][data-answered="approved"]`, approval)),
		chromedp.WaitVisible(sel(`#transcript [data-seq="%d"]`, head)),
	)
	var got string
	for _, ev := range events {
		if ev.Seq == result {
			got = ev.Text
		}
	}
	if !strings.Contains(got, "created made.txt") {
		t.Fatalf("the program reported %q; it was approved from the page", got)
	}
	if _, err := os.Stat(filepath.Join(n1.DataDir, "workspaces", id, "made.txt")); err != nil {
		t.Fatalf("the approved tool did not run in the workspace on n1: %v", err)
	}
	p.console.checkNoExceptions(t)
}
