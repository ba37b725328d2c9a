// Package web embeds the browser page every node serves at /ui/: plain
// HTML, CSS and JavaScript (no build step) that talks to the node with the
// Connect protocol in JSON, over exactly the RPCs the terminal client uses.
//
// The files are public: they hold no data, and every RPC the page makes
// carries the bearer token the person types in (or passes in the URL
// fragment, which never reaches the server).
package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// Prefix is the path the page is served under.
const Prefix = "/ui/"

//go:embed static
var static embed.FS

// contentTypes are set explicitly instead of from the system's MIME table,
// which differs between machines (and nosniff makes a wrong one fatal).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
}

// csp allows nothing but the node itself: no inline script, no external
// URL. The page works offline, served by the node.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// Handler serves the embedded files under Prefix. Mount it on Prefix; an
// http.ServeMux redirects the bare "/ui" to "/ui/" by itself.
func Handler() http.Handler {
	root, err := fs.Sub(static, "static")
	if err != nil {
		panic("web: " + err.Error()) // the directory is embedded at build time
	}
	etags := map[string]string{}
	_ = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		etags[p] = `"` + hex.EncodeToString(sum[:8]) + `"`
		return nil
	})
	files := http.StripPrefix(strings.TrimSuffix(Prefix, "/"), http.FileServerFS(root))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(path.Clean(r.URL.Path), strings.TrimSuffix(Prefix, "/"))
		name = strings.TrimPrefix(name, "/")
		if name == "" || strings.HasSuffix(r.URL.Path, "/") {
			name = path.Join(name, "index.html")
		}
		h := w.Header()
		if ct, ok := contentTypes[path.Ext(name)]; ok {
			h.Set("Content-Type", ct)
		}
		// Embedded files carry no modification time, so revalidate by
		// content hash: a new build is picked up at once, an unchanged
		// file costs a 304.
		if tag, ok := etags[name]; ok {
			h.Set("ETag", tag)
		}
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		files.ServeHTTP(w, r)
	})
}
