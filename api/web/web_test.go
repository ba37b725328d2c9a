package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// mux mounts the page the way api.Server does.
func mux() *http.ServeMux {
	m := http.NewServeMux()
	m.Handle(Prefix, Handler())
	return m
}

func get(t *testing.T, h http.Handler, method, path string, hdr ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestServesPageAndAssets: GET /ui/ is the page, every script and
// stylesheet it references is served with its content type, and nothing
// points outside the node.
func TestServesPageAndAssets(t *testing.T) {
	h := mux()
	r := get(t, h, "GET", "/ui/")
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET /ui/: %d", r.StatusCode)
	}
	if ct := r.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Fatalf("GET /ui/: Content-Type %q", ct)
	}
	for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options", "ETag"} {
		if r.Header.Get(h) == "" {
			t.Errorf("GET /ui/: no %s header", h)
		}
	}
	page := body(t, r)
	if !strings.Contains(page, `id="session-list"`) || !strings.Contains(page, `id="transcript"`) {
		t.Fatalf("GET /ui/ is not the page:\n%s", page)
	}
	if m := regexp.MustCompile(`(?i)(src|href)="(https?:)?//`).FindString(page); m != "" {
		t.Fatalf("the page references an external URL: %s", m)
	}

	refs := regexp.MustCompile(`(?:src|href)="([a-z]+\.(?:js|css))"`).FindAllStringSubmatch(page, -1)
	want := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	if len(refs) < 5 {
		t.Fatalf("the page references %d assets; want connect.js, ui.js, transcript.js, session.js, app.js and style.css", len(refs))
	}
	for _, ref := range refs {
		name := ref[1]
		r := get(t, h, "GET", Prefix+name)
		if r.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", name, r.StatusCode)
			continue
		}
		ext := name[strings.LastIndex(name, "."):]
		if ct := r.Header.Get("Content-Type"); ct != want[ext] {
			t.Errorf("GET %s: Content-Type %q, want %q", name, ct, want[ext])
		}
		if b := body(t, r); len(b) < 100 {
			t.Errorf("GET %s: %d bytes", name, len(b))
		} else if strings.Contains(b, "http://") || strings.Contains(b, "https://") {
			t.Errorf("%s mentions an external URL", name)
		}
		// Revalidation by content hash answers 304.
		if r2 := get(t, h, "GET", Prefix+name, "If-None-Match", r.Header.Get("ETag")); r2.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", name, r2.StatusCode)
		}
	}
}

func TestRedirectsAndMethods(t *testing.T) {
	h := mux()
	r := get(t, h, "GET", "/ui")
	if r.StatusCode/100 != 3 || r.Header.Get("Location") != "/ui/" {
		t.Fatalf("GET /ui: %d Location %q, want a redirect to /ui/", r.StatusCode, r.Header.Get("Location"))
	}
	if r := get(t, h, "GET", "/ui/nope.js"); r.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /ui/nope.js: %d", r.StatusCode)
	}
	if r := get(t, h, "POST", "/ui/"); r.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /ui/: %d", r.StatusCode)
	}
	if r := get(t, h, "HEAD", "/ui/app.js"); r.StatusCode != http.StatusOK {
		t.Fatalf("HEAD /ui/app.js: %d", r.StatusCode)
	}
}
