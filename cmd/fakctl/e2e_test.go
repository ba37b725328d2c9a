package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fak-dev/fak/node/testcluster"
)

// runCLI runs fakctl against addr with the test token unless args set one.
func runCLI(t *testing.T, addr string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCLIContext(context.Background(), addr, &bytes.Buffer{}, args...)
}

func runCLIContext(ctx context.Context, addr string, out interface {
	Write([]byte) (int, error)
	String() string
}, args ...string,
) (code int, stdout, stderr string) {
	var errOut bytes.Buffer
	args = append([]string{"--addr", addr}, args...)
	code = runContext(ctx, args, out, &errOut)
	return code, out.String(), errOut.String()
}

func TestSessionCommandsEndToEnd(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newFakeFleet()
	url := fleet.start(t)
	hostPort := strings.TrimPrefix(url, "http://")

	code, out, errOut := runCLI(t, hostPort, "session", "create", "--title", "demo", "--objective", "test")
	if code != exitOK || out != "s-1\n" {
		t.Fatalf("create: code %d stdout %q stderr %q", code, out, errOut)
	}

	// The journal starts with session.created and epoch.changed; appends
	// default to note, the kind any client may append.
	for i, text := range []string{"hello", "multi\nline", "third"} {
		code, out, errOut = runCLI(t, url, "session", "append", "s-1", "--text", text)
		if want := fmt.Sprintf("Appended s-1 seq %d\n", i+3); code != exitOK || out != want {
			t.Fatalf("append: code %d stdout %q stderr %q", code, out, errOut)
		}
	}

	// Compare-and-append against a stale head fails with the reason, on one line.
	code, out, errOut = runCLI(t, url, "session", "append", "s-1", "--text", "x", "--expected-seq", "1")
	if want := "Error: SEQ_MISMATCH: expected head 1, journal head is 5\n"; code != exitError || out != "" || errOut != want {
		t.Errorf("append --expected-seq: code %d stdout %q stderr %q", code, out, errOut)
	}
	code, _, errOut = runCLI(t, url, "session", "append", "s-1", "--kind", "checkpoint", "--text", "ok", "--expected-seq", "5")
	if code != exitOK {
		t.Errorf("append --expected-seq 5: code %d stderr %q", code, errOut)
	}
	// Input goes through Act, output is the runner's: the fleet refuses them.
	code, out, errOut = runCLI(t, url, "session", "append", "s-1", "--kind", "input", "--text", "hi")
	if want := "Error: INVALID_ARGUMENT: kind \"input\" cannot be appended by clients\n"; code != exitError || out != "" || errOut != want {
		t.Errorf("append --kind input: code %d stdout %q stderr %q", code, out, errOut)
	}

	// The read pages (two events per page) through to the head.
	code, out, errOut = runCLI(t, url, "session", "log", "s-1", "--from", "2")
	want := eventLines(
		eventLine(2, "epoch.changed", "epoch 1: echo on n1"),
		eventLine(3, "note", "note: hello"),
		eventLine(4, "note", `note: multi\nline`),
		eventLine(5, "note", "note: third"),
		eventLine(6, "checkpoint", "checkpoint: ok"),
	)
	if code != exitOK || out != want {
		t.Errorf("log: code %d stderr %q\nstdout:\n%s\nwant:\n%s", code, errOut, out, want)
	}

	code, out, _ = runCLI(t, url, "-o", "json", "session", "log", "s-1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var first struct{ Seq, Kind, Text string }
	if code != exitOK || len(lines) != 6 || json.Unmarshal([]byte(lines[0]), &first) != nil ||
		first.Seq != "1" || first.Kind != "session.created" || first.Text != "demo" {
		t.Errorf("log -o json: code %d stdout:\n%s", code, out)
	}

	code, _, errOut = runCLI(t, url, "session", "log", "s-404")
	if code != exitOK || errOut != "" {
		t.Errorf("log of an empty journal: code %d stderr %q", code, errOut)
	}
}

func TestFollowPrintsLiveEventsUntilInterrupted(t *testing.T) {
	isolateEnv(t)
	// The token comes from the dev token file, and must reach the stream too.
	writeFile(t, devTokenPath, testToken+"\n")
	fleet := newFakeFleet()
	url := fleet.start(t)
	runCLI(t, url, "session", "create", "--title", "follow")
	runCLI(t, url, "session", "append", "s-1", "--text", "one")
	runCLI(t, url, "session", "append", "s-1", "--text", "two") // seq 4

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := newLineWriter()
	done := make(chan int)
	var errOut string
	go func() {
		var code int
		code, _, errOut = runCLIContext(ctx, url, out, "session", "log", "s-1", "--follow", "--from", "4")
		done <- code
	}()

	out.waitLines(t, 1)
	runCLI(t, url, "session", "append", "s-1", "--text", "three")
	runCLI(t, url, "session", "append", "s-1", "--text", "four")
	out.waitLines(t, 3)
	cancel() // what Ctrl-C does

	if code := <-done; code != exitOK || errOut != "" {
		t.Errorf("follow: code %d stderr %q", code, errOut)
	}
	want := eventLines(eventLine(4, "note", "note: two"), eventLine(5, "note", "note: three"), eventLine(6, "note", "note: four"))
	if out.String() != want {
		t.Errorf("follow stdout:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestFollowResumesAfterBrokenStream(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newFakeFleet()
	fleet.watchBreaks = 2
	url := fleet.start(t)
	runCLI(t, url, "session", "create", "--title", "flaky")
	for _, text := range []string{"a", "b", "c", "d"} {
		runCLI(t, url, "session", "append", "s-1", "--text", text)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := newLineWriter()
	done := make(chan int)
	var errOut string
	go func() {
		var code int
		code, _, errOut = runCLIContext(ctx, url, out, "session", "log", "s-1", "--follow", "--from", "3")
		done <- code
	}()
	out.waitLines(t, 4)
	cancel()

	if code := <-done; code != exitOK {
		t.Errorf("follow: code %d stderr %q", code, errOut)
	}
	want := eventLines(eventLine(3, "note", "note: a"), eventLine(4, "note", "note: b"), eventLine(5, "note", "note: c"), eventLine(6, "note", "note: d"))
	if out.String() != want {
		t.Errorf("follow stdout (gaps or duplicates?):\n%s\nwant:\n%s", out.String(), want)
	}
	fleet.mu.Lock()
	defer fleet.mu.Unlock()
	if !slices.Equal(fleet.watchAfter, []uint64{2, 3, 4}) {
		t.Errorf("WatchEvents after_seq per call = %v, want [2 3 4]", fleet.watchAfter)
	}
	if strings.Count(errOut, "reconnecting") != 2 {
		t.Errorf("stderr should note each reconnect:\n%s", errOut)
	}
}

func TestTokenProblemsFailOnOneLine(t *testing.T) {
	isolateEnv(t)
	url := newFakeFleet().start(t)

	t.Setenv("FAK_TOKEN_FILE", "/nonexistent/fak-token")
	code, out, errOut := runCLI(t, url, "session", "list")
	if code != exitError || out != "" || !strings.HasPrefix(errOut, "Error: read token file: ") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("missing token file: code %d stdout %q stderr %q", code, out, errOut)
	}

	// --token wins over the broken file, but the server rejects it.
	code, _, errOut = runCLI(t, url, "session", "log", "s-1", "--follow", "--token", "wrong")
	if code != exitError || errOut != "Error: UNAUTHENTICATED: invalid token\n" {
		t.Errorf("bad token: code %d stderr %q", code, errOut)
	}
	code, _, errOut = runCLI(t, url, "--token", "wrong", "session", "create", "--title", "x")
	if code != exitError || errOut != "Error: UNAUTHENTICATED: invalid token\n" {
		t.Errorf("bad token: code %d stderr %q", code, errOut)
	}
}

func TestClusterStatusEndToEnd(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	url := newFakeFleet().start(t)

	code, out, errOut := runCLI(t, url, "cluster", "status")
	want := "NAME   STATE    TERM   LAST_INDEX   COMMIT   APPLIED   LEADER   ERROR\n" +
		"n1     Leader   2      9            9        9         n1       -\n" +
		"n2     -        -      -            -        -         -        connection refused\n"
	if code != exitOK || out != want {
		t.Errorf("status: code %d stderr %q\nstdout:\n%s\nwant:\n%s", code, errOut, out, want)
	}
	code, out, _ = runCLI(t, url, "cluster", "status", "--all=false")
	if code != exitOK || strings.Contains(out, "n2") || strings.Contains(out, "ERROR") {
		t.Errorf("status --all=false: code %d stdout:\n%s", code, out)
	}
	code, _, errOut = runCLI(t, url, "cluster", "members")
	if code != exitError || !strings.HasPrefix(errOut, "Error: unimplemented: ") {
		t.Errorf("members on a node without it: code %d stderr %q", code, errOut)
	}
}

func TestBenchAppendEndToEnd(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newFakeFleet()
	url := fleet.start(t)

	code, out, errOut := runCLI(t, url, "-o", "json", "bench", "append",
		"--sessions", "3", "--clients", "4", "--total", "50", "--size", "16", "--batch", "3",
		"--addrs", url+","+strings.TrimPrefix(url, "http://"))
	var summary struct {
		Events, Calls, Errors int64
		Addrs                 []string
		LatencyMillis         struct{ P50, Max float64 } `json:"latency_ms"`
	}
	if err := json.Unmarshal([]byte(out), &summary); code != exitOK || err != nil {
		t.Fatalf("bench: code %d err %v stderr %q stdout:\n%s", code, err, errOut, out)
	}
	if summary.Events != 50 || summary.Calls != 17 || summary.Errors != 0 || len(summary.Addrs) != 2 ||
		summary.LatencyMillis.P50 <= 0 || summary.LatencyMillis.Max < summary.LatencyMillis.P50 {
		t.Errorf("summary = %+v", summary)
	}
	fleet.mu.Lock()
	total := 0
	for id, events := range fleet.events {
		events = events[2:] // session.created, epoch.changed
		total += len(events)
		if len(events) < 15 {
			t.Errorf("session %s got %d events; appends should spread evenly", id, len(events))
		}
		if len(events) > 0 && (len(events[0].GetText()) != 16 || events[0].GetKind() != "note") {
			t.Errorf("event = %v", events[0])
		}
	}
	fleet.mu.Unlock()
	if total != 50 || len(fleet.sessions) != 3 {
		t.Errorf("fleet holds %d events in %d sessions, want 50 in 3", total, len(fleet.sessions))
	}
}

func TestBenchAppendReportsFailures(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newFakeFleet()
	fleet.maxTextBytes = 8
	url := fleet.start(t)

	code, out, errOut := runCLI(t, url, "bench", "append", "--sessions", "2", "--clients", "2", "--total", "10", "--size", "9")
	if code != exitError {
		t.Errorf("code %d, want %d", code, exitError)
	}
	if !strings.Contains(out, "Errors:        10") {
		t.Errorf("stdout:\n%s", out)
	}
	if !strings.Contains(errOut, "10  INVALID_ARGUMENT: event text too large") ||
		!strings.HasSuffix(errOut, "Error: 10 of 10 calls failed\n") {
		t.Errorf("stderr:\n%s", errOut)
	}
}

func eventLine(seq uint64, kind, text string) string {
	return fmt.Sprintf("%d  %s  %s  %s", seq, eventTime(seq).Local().Format("15:04:05.000"), kind, text)
}

func eventLines(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// lineWriter collects output written concurrently and lets a test wait for
// a number of lines.
type lineWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // signalled after each write
}

func newLineWriter() *lineWriter { return &lineWriter{written: make(chan struct{}, 1)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.written <- struct{}{}:
	default:
	}
	return w.buf.Write(p)
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *lineWriter) waitLines(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for strings.Count(w.String(), "\n") < n {
		select {
		case <-w.written:
		case <-timeout:
			t.Fatalf("timed out waiting for %d lines; got:\n%s", n, w.String())
		}
	}
}

// oneNodeFleet starts a one-node in-process fleet for fakctl to talk to,
// with FAK_TOKEN set to its token and no other FAK_* setting, and
// returns the fleet (skipped with -short).
func oneNodeFleet(t *testing.T) *testcluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an in-process fleet; skipped with -short")
	}
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testcluster.Token)
	return testcluster.New(t, testcluster.Options{Nodes: 1})
}
