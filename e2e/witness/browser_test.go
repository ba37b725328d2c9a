package witness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// browserNames are looked up on PATH in this order: Debian's package, other
// distributions' and Google's builds.
var browserNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// findBrowser returns a headless-capable Chromium. Without one the test
// skips, except under CI=true, where .ci/run installs it and its absence is
// a failure.
func findBrowser(t *testing.T) string {
	t.Helper()
	for _, name := range browserNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium on PATH (looked for chromium, chromium-browser, google-chrome); apt-get install chromium"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// newBrowser starts a headless Chromium with its own profile directory and
// returns a tab context; everything is torn down with the test.
func newBrowser(t *testing.T, execPath string) context.Context {
	t.Helper()
	// The defaults already run headless and keep off /dev/shm (a few MiB
	// in containers, where Chromium would crash tabs).
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(execPath),
		// Tests run as root, where Chromium's sandbox cannot start.
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "chromium")),
		chromedp.WindowSize(1400, 1000),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	// Start the browser now, so a browser that cannot start fails here
	// with its own error rather than in the first step. (The first Run
	// owns the browser: it must not get a context that ends before the
	// test does.)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", execPath, err)
	}
	return ctx
}

// artifactsDir is $FAK_ARTIFACTS, or the test's temp dir.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("FAK_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// consoleLog collects what the page writes to its console (and uncaught
// exceptions), to show with a failure.
type consoleLog struct {
	mu         sync.Mutex
	lines      []string
	exceptions []string
}

func watchConsole(ctx context.Context) *consoleLog {
	l := &consoleLog{}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			l.mu.Lock()
			l.lines = append(l.lines, m.String())
			if m.IsException() {
				l.exceptions = append(l.exceptions, m.String())
			}
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *consoleLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 {
		return "(nothing on the page's console)"
	}
	return strings.Join(l.lines, "\n")
}

// checkNoExceptions fails the test if the page threw an uncaught exception
// or left a promise rejection unhandled.
func (l *consoleLog) checkNoExceptions(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.exceptions) > 0 {
		t.Errorf("the page threw:\n%s", strings.Join(l.exceptions, "\n"))
	}
}
