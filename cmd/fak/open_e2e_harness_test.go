package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/client/journal"
	"github.com/fak-dev/fak/node/testcluster"
)

// quietFleet: node logs off. A test that stops a node leaves memberlist
// goroutines that may log after the test ended, which testcluster's log
// writer turns into a data race under -race; failures here print the
// client's transcript instead.
var quietFleet = testcluster.Options{Nodes: 3, LogLevel: "off"}

// scriptNode is the placement of sessions driven by scriptRunner: no node
// has that name, so no real runner hosts them.
const scriptNode = "script"

// syncBuffer is a bytes.Buffer safe to read while the command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// openRun is one run of `fak session open` against a test fleet.
type openRun struct {
	stdout, stderr syncBuffer
	code           int
	done           chan struct{}
}

// startOpen runs the command in the background with stdin and tty-ness
// given, against node n, until it exits or ctx ends.
func startOpen(ctx context.Context, c *testcluster.Cluster, n *testcluster.Node, stdin io.Reader, tty bool, args ...string) *openRun {
	r := &openRun{done: make(chan struct{})}
	args = append(args, "--addr", "http://"+n.APIAddr, "--token", testcluster.Token)
	go func() {
		defer close(r.done)
		r.code = runOpen(ctx, args, sessionIO{
			stdin: stdin, stdout: &r.stdout, stderr: &r.stderr, tty: tty,
			getenv: func(string) string { return "" }, workDir: "/nonexistent",
			httpClient: c.HTTPClient(),
		})
	}()
	return r
}

// wait waits for the command to exit; the command's own context bounds it.
func (r *openRun) wait(t *testing.T) int {
	t.Helper()
	<-r.done
	return r.code
}

// runOpenSync runs the command to completion with a deadline.
func runOpenSync(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, stdin string, args ...string) *openRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := startOpen(ctx, c, n, strings.NewReader(stdin), false, args...)
	r.wait(t)
	return r
}

// waitOutput waits until the command's stdout matches re, or fails.
func (r *openRun) waitOutput(t *testing.T, what string, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := re.FindStringSubmatch(r.stdout.String()); m != nil {
			return m
		}
		select {
		case <-r.done:
			if m := re.FindStringSubmatch(r.stdout.String()); m != nil {
				return m
			}
			t.Fatalf("command exited (%d) before printing %s\nstdout:\n%s\nstderr:\n%s", r.code, what, r.stdout.String(), r.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\nstdout:\n%s\nstderr:\n%s", what, r.stdout.String(), r.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func createSessionOn(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, title, placeOn string) string {
	t.Helper()
	req := &fakv1.CreateSessionRequest{Title: title}
	if placeOn != "" {
		req.Placement = &fakv1.Placement{Node: placeOn}
	}
	resp, err := c.Sessions(n).CreateSession(c.Context(10*time.Second), connect.NewRequest(req))
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	return resp.Msg.GetSession().GetSessionId()
}

func readJournal(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id string) []*fakv1.Event {
	t.Helper()
	var out []*fakv1.Event
	for from := uint64(1); ; {
		resp, err := c.Sessions(n).ReadEvents(c.Context(10*time.Second), connect.NewRequest(&fakv1.ReadEventsRequest{
			SessionId: id, FromSeq: from, Limit: 1000,
		}))
		if err != nil {
			t.Fatalf("read events: %v", err)
		}
		out = append(out, resp.Msg.GetEvents()...)
		if len(resp.Msg.GetEvents()) == 0 || out[len(out)-1].GetSeq() >= resp.Msg.GetHeadSeq() {
			return out
		}
		from = out[len(out)-1].GetSeq() + 1
	}
}

// cutControls takes the capability block out of a transcript, leaving the
// line CONTROLS in its place: the set of controls grows as the fleet learns
// new ones, so tests check it against the descriptor (checkControls).
func cutControls(t *testing.T, transcript string) (rest, block string) {
	t.Helper()
	lines := strings.SplitAfter(transcript, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "controls (") })
	if start < 0 {
		t.Fatalf("no controls in transcript:\n%s", transcript)
	}
	end := start + 1
	for end < len(lines) && strings.HasPrefix(lines[end], "  ") {
		end++
	}
	block = strings.Join(lines[start:end], "")
	rest = strings.Join(lines[:start], "") + "CONTROLS\n" + strings.Join(lines[end:], "")
	return rest, block
}

// checkControls asserts that a printed capability block is titled as given
// and has one line for every control the session's descriptor lists, and
// lines matching the patterns.
func checkControls(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id, block, as string, patterns ...string) {
	t.Helper()
	resp, err := c.Sessions(n).DescribeSession(c.Context(10*time.Second), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	cs := resp.Msg.GetCapabilities()
	if title := fmt.Sprintf("controls (v%d, %s):\n", cs.GetVersion(), as); !strings.HasPrefix(block, title) {
		t.Fatalf("controls block does not start with %q:\n%s", title, block)
	}
	lines := strings.Split(strings.TrimSuffix(block, "\n"), "\n")[1:]
	if len(lines) != len(cs.GetControls()) {
		t.Fatalf("%d controls printed, the descriptor has %d:\n%s", len(lines), len(cs.GetControls()), block)
	}
	for i, ctl := range cs.GetControls() {
		if f := strings.Fields(lines[i]); len(f) < 2 || f[0] != ctl.GetName() {
			t.Fatalf("control %d printed as %q, want %s", i, lines[i], ctl.GetName())
		}
	}
	for _, p := range patterns {
		if !regexp.MustCompile("(?m)^  " + p + "$").MatchString(block) {
			t.Fatalf("no control line matching %q:\n%s", p, block)
		}
	}
}

var addrLine = regexp.MustCompile(`(?m)^#(\d+) `)

// addresses lists the event addresses a transcript printed, in order.
func addresses(transcript string) []uint64 {
	var out []uint64
	for _, m := range addrLine.FindAllStringSubmatch(transcript, -1) {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		out = append(out, n)
	}
	return out
}

// checkAddresses asserts that a transcript printed every journal event
// from..to exactly once and in order: every event starts a line with its
// address, except output chunks continuing a reply.
func checkAddresses(t *testing.T, transcript string, events []*fakv1.Event, from, to uint64) {
	t.Helper()
	var want []uint64
	prevOutput := false
	for _, ev := range events {
		isOutput := ev.GetKind() == journal.KindOutput
		if ev.GetSeq() >= from && ev.GetSeq() <= to && !(isOutput && prevOutput && ev.GetSeq() > from) {
			want = append(want, ev.GetSeq())
		}
		prevOutput = isOutput
	}
	var got []uint64
	for _, a := range addresses(transcript) {
		if a >= from && a <= to {
			got = append(got, a)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("printed addresses %v, want %v\ntranscript:\n%s", got, want, transcript)
	}
}

func lineWith(t *testing.T, transcript string, re string) string {
	t.Helper()
	m := regexp.MustCompile("(?m)^" + re + "$").FindString(transcript)
	if m == "" {
		t.Fatalf("no line matching %q in transcript:\n%s", re, transcript)
	}
	return m
}
