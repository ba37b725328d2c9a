package witness

import (
	"context"
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// TestBrowserResumesAfterNodeRestart: the page steals the input lease, then
// the node serving it restarts while the journal grows; the page reconnects
// on its own, shows every event exactly once, in order, and still holds the
// lease to send input.
func TestBrowserResumesAfterNodeRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster and a headless Chromium; skipped with -short")
	}
	browser := findBrowser(t)
	c := testcluster.New(t, testcluster.Options{})
	n1, n2 := c.Nodes[0], c.Nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*stepTimeout)
	defer cancel()
	cr, err := c.Sessions(n1).CreateSession(ctx, connect.NewRequest(&fakv1.CreateSessionRequest{Title: "resume"}))
	if err != nil {
		t.Fatal(err)
	}
	id := cr.Msg.GetSession().GetSessionId()
	// Notes are the events any client may append; their texts are checked
	// against the page.
	notes := map[uint64]string{}
	note := func(i int) uint64 {
		t.Helper()
		text := fmt.Sprintf("note %d", i)
		r, err := c.Sessions(n1).AppendEvents(ctx, connect.NewRequest(&fakv1.AppendEventsRequest{
			SessionId: id, Events: []*fakv1.EventInput{{Kind: "note", Text: text}},
		}))
		if err != nil {
			t.Fatalf("append %q: %v", text, err)
		}
		notes[r.Msg.GetFirstSeq()] = "note: " + text
		return r.Msg.GetFirstSeq()
	}
	for i := 1; i <= 3; i++ {
		note(i)
	}

	// Another client holds the input lease: the page has to steal it.
	other, err := c.Sessions(n1).Attach(ctx, connect.NewRequest(&fakv1.AttachRequest{SessionId: id, ClientKind: "terminal", ClientName: "other"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sessions(n1).TakeLease(ctx, connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: id, AttachmentId: other.Msg.GetAttachmentId()})); err != nil {
		t.Fatal(err)
	}

	p := openPage(t, browser, artifactsDir(t))
	p.do("open the session on node 2 and steal the lease",
		chromedp.Navigate(apiURL(n2)+"/ui/#token="+testcluster.Token+"&session="+id),
		chromedp.WaitVisible(sel(`#session-view[data-attachment-id^="att_"]`)),
		chromedp.WaitVisible(sel(`#watch-state[data-state="live"]`)),
		chromedp.WaitVisible(sel(`#controls [data-control="input.text"][data-available="false"]`)),
		chromedp.WaitEnabled(sel(`#lease-steal`)),
		chromedp.Click(sel(`#lease-steal`)),
		chromedp.WaitEnabled(sel(`#input-send`)),
	)
	c.Stop(n2)
	p.do("notice that node 2 is gone", chromedp.WaitVisible(sel(`#watch-state[data-state="reconnecting"]`)))
	var last uint64
	for i := 4; i <= 8; i++ {
		last = note(i)
	}
	c.Start(n2)
	for i := 9; i <= 10; i++ {
		last = note(i)
	}
	p.do("resume after node 2 restarts",
		chromedp.WaitVisible(sel(`#transcript [data-seq="%d"]`, last)),
		chromedp.WaitVisible(sel(`#watch-state[data-state="live"]`)),
	)
	// The page still holds the lease (it kept renewing it) and acts again.
	p.do("send input after the restart",
		chromedp.WaitEnabled(sel(`#input-send`)),
		chromedp.SendKeys(sel(`#input-text`), "after the restart"),
		chromedp.Click(sel(`#input-send`)),
		chromedp.WaitVisible(sel(`#input-result[data-seq]`)),
	)
	events := waitTurns(t, c, n1, id, 1)
	input := findInput(t, events, "after the restart", last)
	head := events[len(events)-1].Seq
	p.do("see the turn", chromedp.WaitVisible(sel(`#transcript [data-seq="%d"]`, head)))
	if got := p.text(fmt.Sprintf(`#transcript .event[data-seq="%d"] .body`, input)); got != "after the restart" {
		t.Errorf("#%d shows %q", input, got)
	}
	seqs := p.seqs()
	checkContiguous(t, seqs, head)
	p.console.checkNoExceptions(t)
	if seqs[0] != 1 {
		t.Errorf("the transcript starts at #%d, want #1 (the journal is shorter than the replay window)", seqs[0])
	}
	for seq, want := range notes {
		if got := p.text(fmt.Sprintf(`#transcript .event[data-seq="%d"] .body`, seq)); got != want {
			t.Errorf("#%d shows %q, want %q", seq, got, want)
		}
	}
}
