package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fak-dev/fak/node/testcluster"
)

// startOpenCtrlC is startOpen for an interactive client that gets Ctrl-C
// presses on the returned channel, as `fak session open` on a terminal
// does.
func startOpenCtrlC(ctx context.Context, c *testcluster.Cluster, n *testcluster.Node, stdin io.Reader, args ...string) (*openRun, chan<- struct{}) {
	r := &openRun{done: make(chan struct{})}
	ctrlC := make(chan struct{}, 1)
	args = append(args, "--addr", "http://"+n.APIAddr, "--token", testcluster.Token)
	go func() {
		defer close(r.done)
		r.code = runOpen(ctx, args, sessionIO{
			stdin: stdin, stdout: &r.stdout, stderr: &r.stderr, tty: true, interrupts: ctrlC,
			getenv: func(string) string { return "" }, workDir: "/nonexistent",
			httpClient: c.HTTPClient(),
		})
	}()
	return r, ctrlC
}

// TestOpenE2E_CtrlC: in `fak session open` on a terminal, Ctrl-C during a
// turn interrupts it (the fleet closes it, interrupted by this client) and
// the session goes on to the next input; Ctrl-C with no turn running
// detaches, and so does a second Ctrl-C within 2 s of the first.
func TestOpenE2E_CtrlC(t *testing.T) {
	// A long echo turn: 4 s spread over the reply's chunks (8 for a long
	// input), so the runner learns of the interrupt within half a second.
	c := testcluster.New(t, testcluster.Options{Nodes: 3, EchoTurn: 4 * time.Second, LogLevel: "off"})
	n1 := c.Nodes[0]
	id := createSessionOn(t, c, n1, "ctrl-c", "")
	long := strings.TrimSpace(strings.Repeat("word ", 40))

	t.Run("interrupt, then detach", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		stdin, typing := io.Pipe()
		defer typing.Close()
		r, ctrlC := startOpenCtrlC(ctx, c, n1, stdin, id, "--name", "t1")
		wait := func(what, re string) []string {
			t.Helper()
			return r.waitOutput(t, what, regexp.MustCompile(re))
		}
		wait("the controls", `(?m)^  turn\.interrupt +/interrupt or Ctrl-C +unavailable: no turn is running \(NO_TURN_RUNNING\)$`)
		fmt.Fprintln(typing, long)
		in := wait("the input", `(?m)^#(\d+) you> word`)[1]
		wait("the turn", `(?m)^#\d+ turn started for input #`+in+` `)
		ctrlC <- struct{}{}
		wait("the interrupt", `(?m)^#\d+ turn of input #`+in+` interrupted by you$`)
		wait("the notice", `(?m)^-- interrupted the turn of input #`+in+`\n(?:.*\n)*-- Ctrl-C again within 2s detaches$`)
		// The session goes on: the next input is answered.
		fmt.Fprintln(typing, "next")
		wait("the next reply", `(?m)^#\d+ agent> echo: next\n#\d+ turn completed`)
		// No turn running: Ctrl-C detaches.
		ctrlC <- struct{}{}
		if code := r.wait(t); code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, r.stdout.String(), r.stderr.String())
		}
		if got := attachmentCount(t, c, n1, id); got != 0 {
			t.Fatalf("%d attachments after Ctrl-C, want none", got)
		}
	})

	t.Run("double Ctrl-C detaches", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		stdin, typing := io.Pipe()
		defer typing.Close()
		r, ctrlC := startOpenCtrlC(ctx, c, n1, stdin, id, "--name", "t2")
		r.waitOutput(t, "the controls", regexp.MustCompile(`(?m)^  turn\.interrupt `))
		fmt.Fprintln(typing, long)
		in := r.waitOutput(t, "the input", regexp.MustCompile(`(?m)^#(\d+) you> word`))[1]
		r.waitOutput(t, "the turn", regexp.MustCompile(`(?m)^#\d+ turn started for input #`+in+` `))
		ctrlC <- struct{}{}
		r.waitOutput(t, "the notice", regexp.MustCompile(`(?m)^-- Ctrl-C again within 2s detaches$`))
		ctrlC <- struct{}{}
		if code := r.wait(t); code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, r.stdout.String(), r.stderr.String())
		}
	})
}
