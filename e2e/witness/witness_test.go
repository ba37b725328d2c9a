package witness

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

const (
	terminalLine = "hello"
	browserLine  = "hello from the browser"
	browserName  = "witness"
	// toolLine makes the echo agent call a tool, which waits for approval.
	toolLine    = "!tool ls -la"
	turnTimeout = 90 * time.Second
)

func apiURL(n *testcluster.Node) string { return "http://" + n.APIAddr }

// pageURL is the link `fak dev` prints: the page with the token in the
// fragment, which the page moves to sessionStorage.
func pageURL(n *testcluster.Node) string {
	return apiURL(n) + "/ui/#token=" + url.QueryEscape(testcluster.Token)
}

// TestTwoClientWitness is issue 4's witness, end to end on a real
// three-node cluster: the terminal client creates and opens a session on
// node 1 and sends a line; a headless Chromium opens /ui/ on node 2, sees
// the same addressed transcript, takes the input lease (stealing it if the
// terminal still holds it) and sends input; the terminal client,
// reconnecting on node 3, sees the browser's input and the agent's reply at
// the same addresses.
func TestTwoClientWitness(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fak and fakctl, runs a three-node cluster and a headless Chromium; skipped with -short")
	}
	browser := findBrowser(t)
	shots := artifactsDir(t)
	bins := buildBinaries(t)
	c := testcluster.New(t, testcluster.Options{})
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]

	// 1. The terminal: create the session and open it on node 1, sending a
	// line; non-interactively it exits after the turn completes.
	id := strings.TrimSpace(cli(t, bins.fakctl, "", "session", "create", "--title", "witness",
		"--objective", "one session, two clients", "--addr", apiURL(n1), "--token", testcluster.Token))
	if !strings.HasPrefix(id, "ses_") {
		t.Fatalf("fakctl session create printed %q, want a session id", id)
	}
	term1 := cli(t, bins.fak, terminalLine+"\n", "session", "open", id, "--addr", apiURL(n1), "--token", testcluster.Token)

	events := journal(t, c, n1, id)
	input1 := findInput(t, events, terminalLine, 0)
	reply1 := replyAfter(t, events, input1)
	wantLine(t, term1, fmt.Sprintf("#%d you> %s", input1, terminalLine))
	wantLine(t, term1, fmt.Sprintf("#%d agent> %s", reply1.first, strings.TrimRight(reply1.text, "\n")))
	head1 := events[len(events)-1].Seq

	// 2. The browser on node 2: the fleet overview lists the session;
	// selecting it opens the attachment with the same addressed transcript.
	p := openPage(t, browser, shots)
	row := sel(`#session-list tr[data-session-id=%q]`, id)
	p.do("open the fleet overview on node 2 and select the session",
		chromedp.Navigate(pageURL(n2)),
		chromedp.WaitVisible(row),
		chromedp.SetValue(chromedp.CSS("#client-name"), browserName),
		chromedp.Click(sel(`#session-list tr[data-session-id=%q] td:nth-child(2)`, id)),
		chromedp.WaitVisible(sel(`#transcript [data-seq="%d"]`, head1)),
		chromedp.WaitVisible(sel(`#transcript .reply[data-first-seq="%d"][data-last-seq="%d"]`, reply1.first, reply1.last)),
	)
	if u := p.eval("read the address bar", `location.href`); strings.Contains(u, testcluster.Token) {
		t.Errorf("the token is still in the address bar: %s", u)
	}
	if got := p.text(fmt.Sprintf(`#transcript .event[data-seq="%d"] .body`, input1)); got != terminalLine {
		t.Errorf("browser shows input #%d as %q; the terminal sent %q", input1, got, terminalLine)
	}
	if got := p.text(fmt.Sprintf(`#transcript .reply[data-first-seq="%d"] .body`, reply1.first)); got != reply1.text {
		t.Errorf("browser shows reply #%d as %q; the journal has %q", reply1.first, got, reply1.text)
	}
	shown := setOf(p.seqs())
	for seq := range printedAddresses(term1) {
		if seq <= head1 && !shown[seq] {
			t.Errorf("the terminal printed #%d; the browser does not show it", seq)
		}
	}
	for _, seq := range addressed(events) {
		if !shown[seq] {
			t.Errorf("journal event #%d is not in the browser's transcript", seq)
		}
	}

	// 3. Take the input lease (steal it if the terminal still holds it) and
	// send a line from the browser.
	button := p.poll("wait until the lease can be taken or stolen", `(() => {
		for (const id of ["lease-take", "lease-steal"]) {
			const b = document.getElementById(id);
			if (b && !b.disabled) return "#" + id;
		}
		return "";
	})()`)
	t.Logf("browser: the lease is taken with %s", button)
	p.do("take the lease and send input",
		chromedp.Click(chromedp.CSS(button)),
		chromedp.WaitEnabled(chromedp.CSS("#input-send")),
		chromedp.SendKeys(chromedp.CSS("#input-text"), browserLine),
		chromedp.Click(chromedp.CSS("#input-send")),
		chromedp.WaitVisible(chromedp.CSS("#input-result[data-seq]")),
	)
	input2 := findInput(t, waitTurns(t, c, n2, id, 2), browserLine, input1)
	if got := p.eval("read the address Act returned", `document.querySelector("#input-result").dataset.seq`); got != fmt.Sprint(input2) {
		t.Errorf("Act returned #%s to the browser; the journal has the input at #%d", got, input2)
	}
	events = journal(t, c, n2, id)
	reply2 := replyAfter(t, events, input2)
	head2 := events[len(events)-1].Seq
	p.do("see the agent's reply to the browser's input",
		chromedp.WaitVisible(sel(`#transcript [data-seq="%d"]`, head2)),
		chromedp.WaitVisible(sel(`#transcript .reply[data-first-seq="%d"][data-last-seq="%d"]`, reply2.first, reply2.last)),
		// The descriptor is read again after the turn: it shows the head too.
		chromedp.WaitVisible(sel(`#session-view[data-head="%d"]`, head2)),
	)
	if got := p.text(fmt.Sprintf(`#transcript .reply[data-first-seq="%d"] .body`, reply2.first)); got != reply2.text {
		t.Errorf("browser shows reply #%d as %q; the journal has %q", reply2.first, got, reply2.text)
	}

	// 4. An input asking the echo agent for a tool: the approval it waits
	// for is answered from the browser (an attachment suffices).
	p.do("ask for a tool and approve it",
		chromedp.SendKeys(chromedp.CSS("#input-text"), toolLine),
		chromedp.Click(chromedp.CSS("#input-send")),
		chromedp.WaitEnabled(chromedp.CSS("#transcript .approval button.approve")),
		chromedp.Click(chromedp.CSS("#transcript .approval button.approve")),
	)
	events = waitTurns(t, c, n2, id, 3)
	input3 := findInput(t, events, toolLine, input2)
	approval, answer := kindAfter(t, events, "approval.requested", input3), kindAfter(t, events, "approval.answered", input3)
	head3 := events[len(events)-1].Seq
	p.do("see the approval answered and the turn complete",
		chromedp.WaitVisible(sel(`#transcript .approval[data-seq="%d"][data-answered="approved"]`, approval)),
		chromedp.WaitVisible(sel(`#transcript [data-seq="%d"]`, head3)),
		chromedp.WaitVisible(sel(`#session-view[data-head="%d"]`, head3)),
	)
	if got := p.text(fmt.Sprintf(`#transcript .event[data-seq="%d"] .body`, answer)); !strings.Contains(got, "approved by browser "+browserName) {
		t.Errorf("browser shows the answer #%d as %q", answer, got)
	}
	checkContiguous(t, p.seqs(), head3)
	path := p.screenshot("witness-browser.png")
	t.Logf("screenshot of the page: %s", path)
	p.console.checkNoExceptions(t)

	// 5. The terminal reconnects on node 3 from the first address and sees
	// the browser's input and the agent's reply at the same addresses.
	term2 := cli(t, bins.fak, "", "session", "open", id, "--from", "1", "--addr", apiURL(n3), "--token", testcluster.Token)
	// A new terminal process: the first terminal's input is someone else's now.
	wantMatch(t, term2, fmt.Sprintf(`(?m)^#%d terminal[^\n]*> %s$`, input1, regexp.QuoteMeta(terminalLine)))
	wantLine(t, term2, fmt.Sprintf("#%d browser %s> %s", input2, browserName, browserLine))
	wantLine(t, term2, fmt.Sprintf("#%d agent> %s", reply2.first, strings.TrimRight(reply2.text, "\n")))
	wantLine(t, term2, fmt.Sprintf("#%d approval #%d approved by browser %s", answer, approval, browserName))
	// Each client attached through its own node.
	wantMatch(t, term2, fmt.Sprintf(`(?m)^#\d+ terminal \S+ joined via %s$`, n1.Name))
	wantMatch(t, term2, fmt.Sprintf(`(?m)^#\d+ browser %s joined via %s$`, browserName, n2.Name))
	printed := printedAddresses(term2)
	for _, seq := range addressed(events) {
		if !printed[seq] {
			t.Errorf("journal event #%d (shown by the browser) is missing from the reconnected terminal", seq)
		}
	}
}

// findInput returns the address of the first input after seq with text.
func findInput(t *testing.T, events []*fakv1.Event, text string, after uint64) uint64 {
	t.Helper()
	for _, ev := range events {
		if ev.Seq > after && ev.Kind == "input" && ev.Text == text {
			return ev.Seq
		}
	}
	t.Fatalf("no input %q after #%d in the journal:\n%s", text, after, dumpEvents(events))
	return 0
}

// kindAfter returns the address of the first event of kind after seq.
func kindAfter(t *testing.T, events []*fakv1.Event, kind string, after uint64) uint64 {
	t.Helper()
	for _, ev := range events {
		if ev.Seq > after && ev.Kind == kind {
			return ev.Seq
		}
	}
	t.Fatalf("no %s after #%d in the journal:\n%s", kind, after, dumpEvents(events))
	return 0
}

// waitTurns waits until n turns have completed and nothing is queued or
// running, and returns the journal then.
func waitTurns(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id string, turns uint64) []*fakv1.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	settledLen, settled := -1, 0
	for {
		d, err := c.Sessions(n).DescribeSession(ctx, connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
		if err == nil {
			s := d.Msg.GetSession()
			if s.GetTurnsCompleted() >= turns && s.GetPending().GetTurnInputSeq() == 0 && len(s.GetPending().GetQueuedInputs()) == 0 {
				// The runner charges a turn's output tokens just after
				// turn.completed: return once that charge is in, or the
				// journal has not moved for a second (a turn without output).
				j := journal(t, c, n, id)
				if len(j) > 0 && j[len(j)-1].GetKind() != "turn.completed" {
					return j
				}
				if len(j) == settledLen {
					settled++
				} else {
					settledLen, settled = len(j), 0
				}
				if settled >= 20 {
					return j
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %d completed turns:\n%s", turnTimeout, turns, dumpEvents(journal(t, c, n, id)))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// wantLine fails unless the terminal transcript has a line starting with
// prefix (a reply's text may continue on further lines).
func wantLine(t *testing.T, out, prefix string) {
	t.Helper()
	if !strings.HasPrefix(out, prefix) && !strings.Contains(out, "\n"+prefix) {
		t.Errorf("the terminal did not print %q; it printed:\n%s", prefix, out)
	}
}

func wantMatch(t *testing.T, out, pattern string) {
	t.Helper()
	if !regexp.MustCompile(pattern).MatchString(out) {
		t.Errorf("the terminal printed no line matching %s; it printed:\n%s", pattern, out)
	}
}

func setOf(seqs []uint64) map[uint64]bool {
	m := make(map[uint64]bool, len(seqs))
	for _, s := range seqs {
		m[s] = true
	}
	return m
}

// checkContiguous: the page shows every address from its first to head
// exactly once, in order: nothing lost, nothing duplicated.
func checkContiguous(t *testing.T, seqs []uint64, head uint64) {
	t.Helper()
	if len(seqs) == 0 {
		t.Fatal("the browser's transcript is empty")
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("the browser's transcript goes from #%d to #%d (all: %v)", seqs[i-1], seqs[i], seqs)
		}
	}
	if last := seqs[len(seqs)-1]; last != head {
		t.Fatalf("the browser's transcript ends at #%d; the journal's head is #%d", last, head)
	}
}
