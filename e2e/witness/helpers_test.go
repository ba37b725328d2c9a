package witness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

const (
	buildTimeout = 5 * time.Minute
	cliTimeout   = 2 * time.Minute
	stepTimeout  = 60 * time.Second
)

// binaries are the real client binaries, built once per test.
type binaries struct{ fak, fakctl string }

func buildBinaries(t *testing.T) binaries {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	dir := t.TempDir()
	b := binaries{fak: filepath.Join(dir, "fak"), fakctl: filepath.Join(dir, "fakctl")}
	for _, pkg := range []struct{ out, pkg string }{{b.fak, "./cmd/fak"}, {b.fakctl, "./cmd/fakctl"}} {
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", pkg.out, pkg.pkg)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg.pkg, err, out)
		}
	}
	return b
}

// cli runs a client binary to completion with stdin, in an empty working
// directory and without FAK_* variables (so only its flags choose the node
// and the token), and fails the test unless it exits 0.
func cli(t *testing.T, bin, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader(stdin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FAK_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	line := filepath.Base(bin) + " " + strings.Join(args, " ")
	if err != nil {
		t.Fatalf("%s: %v (stdin %q)\nstdout:\n%s\nstderr:\n%s", line, err, stdin, stdout.String(), stderr.String())
	}
	t.Logf("$ %s <<< %q\n%s", line, stdin, stdout.String())
	if stderr.Len() > 0 {
		t.Logf("stderr of %s:\n%s", line, stderr.String())
	}
	return stdout.String()
}

// journal reads a session's whole journal through a node's API: the ground
// truth both clients are compared against.
func journal(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id string) []*fakv1.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	var out []*fakv1.Event
	from := uint64(1)
	for {
		r, err := c.Sessions(n).ReadEvents(ctx, connect.NewRequest(&fakv1.ReadEventsRequest{SessionId: id, FromSeq: from, Limit: 1000}))
		if err != nil {
			t.Fatalf("read the journal of %s: %v", id, err)
		}
		out = append(out, r.Msg.Events...)
		if len(r.Msg.Events) == 0 || out[len(out)-1].Seq >= r.Msg.HeadSeq {
			return out
		}
		from = out[len(out)-1].Seq + 1
	}
}

// reply is one agent reply: a run of consecutive output events, which both
// clients show as one reply at the address of its first chunk.
type reply struct {
	first, last uint64
	text        string
}

// replyAfter returns the first reply after address seq.
func replyAfter(t *testing.T, events []*fakv1.Event, seq uint64) reply {
	t.Helper()
	var r reply
	for _, ev := range events {
		if ev.Seq <= seq {
			continue
		}
		if ev.Kind == "output" {
			if r.first == 0 {
				r.first = ev.Seq
			}
			r.last = ev.Seq
			r.text += ev.Text
		} else if r.first != 0 {
			break
		}
	}
	if r.first == 0 {
		t.Fatalf("no agent reply after #%d in the journal:\n%s", seq, dumpEvents(events))
	}
	return r
}

// addressed lists the events a transcript shows with their own address:
// all but the output chunks that continue a reply.
func addressed(events []*fakv1.Event) []uint64 {
	var out []uint64
	for i, ev := range events {
		if ev.Kind == "output" && i > 0 && events[i-1].Kind == "output" {
			continue
		}
		out = append(out, ev.Seq)
	}
	return out
}

func dumpEvents(events []*fakv1.Event) string {
	var b strings.Builder
	for _, ev := range events {
		fmt.Fprintf(&b, "  #%d %s %q\n", ev.Seq, ev.Kind, ev.Text)
	}
	return b.String()
}

var addrLine = regexp.MustCompile(`(?m)^#(\d+) `)

// printedAddresses returns the addresses a terminal transcript starts
// lines with.
func printedAddresses(out string) map[uint64]bool {
	seen := map[uint64]bool{}
	for _, m := range addrLine.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		seen[n] = true
	}
	return seen
}

// page drives the browser page in one tab; every step has a deadline, and
// a failing step fails the test with the page's console, its visible text
// and a screenshot.
type page struct {
	t       *testing.T
	ctx     context.Context
	console *consoleLog
	shots   string
}

func openPage(t *testing.T, execPath, shots string) *page {
	ctx := newBrowser(t, execPath)
	return &page{t: t, ctx: ctx, console: watchConsole(ctx), shots: shots}
}

func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.fail(what, err)
	}
}

func (p *page) text(sel string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		p.fail("read "+sel, err)
	}
	return s
}

func (p *page) eval(what, js string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		p.fail(what, err)
	}
	return s
}

// poll waits until the JavaScript expression is truthy and returns it as a
// string.
func (p *page) poll(what, js string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Poll[string](js, chromedp.WithPollingTimeout(stepTimeout), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		p.fail(what, err)
	}
	return s
}

// seqs returns the addresses the transcript shows, in page order.
func (p *page) seqs() []uint64 {
	p.t.Helper()
	raw := p.eval("list the transcript's addresses",
		`[...document.querySelectorAll("#transcript [data-seq]")].map(e => e.dataset.seq).join(",")`)
	var out []uint64
	for _, s := range strings.Split(raw, ",") {
		if s == "" {
			continue
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			p.t.Fatalf("transcript address %q: %v", s, err)
		}
		out = append(out, n)
	}
	return out
}

// screenshot writes a PNG of the whole page to the artifacts directory,
// with the transcript unrolled so the whole conversation is in the picture.
func (p *page) screenshot(name string) string {
	p.t.Helper()
	h := p.eval("unroll the transcript", `(() => {
		const e = document.getElementById("transcript");
		e.style.height = "auto";
		e.style.minHeight = "0";
		return String(document.documentElement.scrollHeight);
	})()`)
	height, err := strconv.ParseInt(h, 10, 64)
	if err != nil {
		p.t.Fatalf("page height %q: %v", h, err)
	}
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	// The viewport grows to the page, so the screenshot holds all of it.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, max(height, 600))); err != nil {
		p.t.Fatalf("resize the viewport: %v", err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(p.shots, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	return path
}

func (p *page) fail(what string, err error) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	shot := "(none)"
	if png, serr := chromedp.Run(ctx, chromedp.FullScreenshot(100)); serr == nil {
		path := filepath.Join(p.shots, "witness-failure.png")
		if os.WriteFile(path, png, 0o644) == nil {
			shot = path
		}
	}
	p.t.Fatalf("browser: %s: %v\nconsole:\n%s\npage text:\n%s\nscreenshot: %s", what, err, p.console, body, shot)
}

// sel quotes a CSS attribute selector value.
func sel(format string, args ...any) chromedp.CSS {
	return chromedp.CSS(fmt.Sprintf(format, args...))
}
