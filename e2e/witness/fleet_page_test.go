package witness

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// TestFleetPage: /ui/fleet.html, opened on a follower, draws the three
// nodes (one leader) from ClusterService/Overview and the session, which
// links to the sessions page; a node stopped shows up as unreachable on a
// later poll.
func TestFleetPage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster and a headless Chromium; skipped with -short")
	}
	browser := findBrowser(t)
	c := testcluster.New(t, testcluster.Options{})
	leader := c.Leader()
	via, other := c.Followers()[0], c.Followers()[1]
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	cr, err := c.Sessions(via).CreateSession(ctx, connect.NewRequest(&fakv1.CreateSessionRequest{Title: "on the fleet page"}))
	if err != nil {
		t.Fatal(err)
	}
	id := cr.Msg.GetSession().GetSessionId()

	p := openPage(t, browser, artifactsDir(t))
	p.do("open the fleet page on a follower",
		chromedp.Navigate(apiURL(via)+"/ui/fleet.html#token="+testcluster.Token),
		chromedp.WaitVisible(sel(`#fleet-nodes tr[data-node="%s"]`, other.Name)),
		chromedp.WaitVisible(sel(`#fleet-sessions tr[data-session-id="%s"]`, id)),
	)
	if n := p.eval("count the nodes", `String(document.querySelectorAll("#fleet-nodes tr[data-node]").length)`); n != "3" {
		t.Errorf("the page shows %s nodes, want 3", n)
	}
	if role := p.text(fmt.Sprintf(`#fleet-nodes tr[data-node="%s"] td:nth-child(3)`, leader.Name)); role != "leader" {
		t.Errorf("%s's role shows %q, want leader", leader.Name, role)
	}
	href := p.eval("read the session link", fmt.Sprintf(`document.querySelector('#fleet-sessions tr[data-session-id="%s"] a').getAttribute("href")`, id))
	if href != "./#session="+id {
		t.Errorf("the session links to %q", href)
	}
	if !strings.Contains(p.text("#fleet-summary"), "Leader "+leader.Name) {
		t.Errorf("summary: %q", p.text("#fleet-summary"))
	}

	c.Stop(other)
	p.do("see the stopped node unreachable",
		chromedp.WaitVisible(sel(`#fleet-nodes tr.unreachable[data-node="%s"]`, other.Name)))
	p.console.checkNoExceptions(t)
}
