package web

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestServesFleetPage: /ui/fleet.html is served with the page's headers,
// every script and stylesheet it references is there, its script polls
// ClusterService/Overview and links sessions to the sessions page, and the
// two pages link to each other.
func TestServesFleetPage(t *testing.T) {
	h := mux()
	r := get(t, h, "GET", "/ui/fleet.html")
	if r.StatusCode != http.StatusOK || r.Header.Get("Content-Type") != "text/html; charset=utf-8" || r.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("GET /ui/fleet.html: %d, Content-Type %q, CSP %q", r.StatusCode, r.Header.Get("Content-Type"), r.Header.Get("Content-Security-Policy"))
	}
	page := body(t, r)
	for _, want := range []string{`id="fleet-nodes"`, `id="fleet-sessions"`, `id="fleet-updated"`, `href="./"`} {
		if !strings.Contains(page, want) {
			t.Errorf("fleet.html lacks %s", want)
		}
	}
	if strings.Contains(page, "<script>") || regexp.MustCompile(`(?i)(src|href)="(https?:)?//`).MatchString(page) {
		t.Errorf("fleet.html has an inline script or an external URL")
	}
	refs := regexp.MustCompile(`(?:src|href)="([a-z]+\.(?:js|css))"`).FindAllStringSubmatch(page, -1)
	var scripts []string
	for _, ref := range refs {
		r := get(t, h, "GET", Prefix+ref[1])
		if r.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", ref[1], r.StatusCode)
		}
		scripts = append(scripts, ref[1])
	}
	if strings.Join(scripts, " ") != "style.css connect.js ui.js fleet.js" {
		t.Errorf("fleet.html references %v", scripts)
	}
	js := body(t, get(t, h, "GET", "/ui/fleet.js"))
	for _, want := range []string{`"ClusterService/Overview"`, "nextPageToken", `"./#session="`, "READ_CONSISTENCY_STALE"} {
		if !strings.Contains(js, want) {
			t.Errorf("fleet.js lacks %s", want)
		}
	}
	if index := body(t, get(t, h, "GET", "/ui/")); !strings.Contains(index, `href="fleet.html"`) {
		t.Errorf("the sessions page does not link to fleet.html")
	}
}
