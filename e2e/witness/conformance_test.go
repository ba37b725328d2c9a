package witness

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/fak-dev/fak/api/web"
	"github.com/fak-dev/fak/client/conformance"
)

// pageControl is one control as the page presents it, read back from its
// DOM by window.fakConformance: the row's data and text, and its button.
type pageControl struct {
	conformance.Presented
	Trigger string `json:"trigger"`
	Enabled bool   `json:"enabled"`
}

// TestConformPage checks the browser page against the client conformance
// corpus (client/conformance), as client/term's TestConformance checks the
// terminal: the real page, served as a node serves it, renders each case's
// descriptor through its own session view (window.fakConformance.render,
// no fleet: the descriptor is the input), and the controls it presents —
// read back from the DOM — and its buttons for each action are compared
// with the corpus. Then it shows the fixture bites: a control row removed
// from the DOM, or a control removed from the page's CONTROLS table, fails
// the comparison.
func TestConformPage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a headless Chromium; skipped with -short")
	}
	browser := findBrowser(t)
	corpus, err := conformance.Load()
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(web.Prefix, web.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	p := openPage(t, browser, artifactsDir(t))
	p.do("open the page", chromedp.Navigate(srv.URL+web.Prefix))
	p.poll("wait for the page's scripts", `typeof fakConformance === "object" && document.readyState === "complete" ? "ready" : ""`)

	render := func(k *conformance.Case) []pageControl {
		t.Helper()
		as, _ := json.Marshal(k.As)
		return decode(t, p.eval("render "+k.Name, fmt.Sprintf(`JSON.stringify(fakConformance.render(%s, %s))`, k.DescriptorJSON, as)))
	}
	for i := range corpus.Cases {
		k := &corpus.Cases[i]
		got := render(k)
		for _, d := range conformance.Compare(k, presented(got)) {
			t.Errorf("%s: %s", k.Name, d)
		}
		for _, a := range k.Actions {
			for _, d := range conformance.CompareAction(k, a, pageActs(t, p, got, a)) {
				t.Errorf("%s: %s", k.Name, d)
			}
		}
	}

	// The fixture bites. A control row missing from the page:
	k := &corpus.Cases[slices.IndexFunc(corpus.Cases, func(c conformance.Case) bool { return c.Name == "lease-held-by-other" })]
	render(k)
	t.Logf("the page's controls for %s: %s", k.Name, p.screenshot("conformance-"+k.Name+".png"))
	p.eval("drop the lease.steal row", `document.querySelector('#controls [data-control="lease.steal"]').remove(), ""`)
	got := decode(t, p.eval("read the controls", `JSON.stringify(fakConformance.controls())`))
	if d := conformance.Compare(k, presented(got)); !slices.Contains(d, "lease.steal: not presented (want available)") {
		t.Errorf("a page without the lease.steal row passes: %q", d)
	}
	// A control the page no longer knows how to drive:
	p.eval("forget lease.steal", `(window.savedSteal = CONTROLS["lease.steal"], delete CONTROLS["lease.steal"], "")`)
	got = render(k)
	if d := conformance.Compare(k, presented(got)); !slices.Contains(d, "lease.steal: presented unavailable UNSUPPORTED, want available") {
		t.Errorf("a page that cannot steal passes: %q", d)
	}
	if d := conformance.CompareAction(k, "lease.steal", pageActs(t, p, got, "lease.steal")); len(d) == 0 {
		t.Errorf("a page that cannot steal passes the steal action")
	}
	p.eval("restore lease.steal", `(CONTROLS["lease.steal"] = window.savedSteal, "")`)
	p.console.checkNoExceptions(t)
}

func decode(t *testing.T, s string) []pageControl {
	t.Helper()
	var out []pageControl
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatalf("the page's controls %q: %v", s, err)
	}
	return out
}

func presented(cs []pageControl) []conformance.Presented {
	out := make([]conformance.Presented, len(cs))
	for i, c := range cs {
		out[i] = c.Presented
	}
	return out
}

// pageActs is what the page does when a user triggers action: its button,
// enabled or not, with the reason and handoff its row shows. Typing is the
// input box itself: its Send button, and the reason shown under it.
func pageActs(t *testing.T, p *page, cs []pageControl, action string) conformance.Acted {
	t.Helper()
	i := slices.IndexFunc(cs, func(c pageControl) bool { return c.Control == action })
	if i < 0 {
		return conformance.Acted{} // no row, no trigger
	}
	c := cs[i]
	a := conformance.Acted{Control: action, Trigger: c.Trigger, Performed: c.Enabled, Reason: c.Reason, Handoff: c.Handoff, Text: c.Text}
	if action == "input.text" {
		var box struct {
			Enabled bool   `json:"enabled"`
			Reason  string `json:"reason"`
		}
		s := p.eval("read the input box", `JSON.stringify({enabled: !document.getElementById("input-send").disabled && !document.getElementById("input-text").disabled,
			reason: document.getElementById("input-reason").textContent})`)
		if err := json.Unmarshal([]byte(s), &box); err != nil {
			t.Fatalf("the input box %q: %v", s, err)
		}
		a.Trigger, a.Performed, a.Text = "#input-send", box.Enabled, box.Reason
	}
	return a
}
