package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// TestOpenE2E_EchoRunner is the scriptable path against the real runner:
// open a session on node 1, send "hello", get the echo adapter's reply;
// then open it on node 2 with --from 1 and nothing to say, and see the
// same addressed events.
func TestOpenE2E_EchoRunner(t *testing.T) {
	c := testcluster.New(t, quietFleet)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	id := createSessionOn(t, c, n1, "echo", "")

	first := runOpenSync(t, c, n1, "hello\n", id, "--name", "t1")
	out := first.stdout.String()
	if first.code != 0 {
		t.Fatalf("open exited %d (did the echo runner of node/runner reply?)\nstdout:\n%s\nstderr:\n%s", first.code, out, first.stderr.String())
	}
	input := lineWith(t, out, `#\d+ you> hello`)
	reply := lineWith(t, out, `#\d+ agent> .+`)
	lineWith(t, out, `#\d+ turn completed.*`)
	inputSeq := addresses(input)[0]
	if addresses(reply)[0] <= inputSeq {
		t.Fatalf("reply %q before input %q", reply, input)
	}
	journal := readJournal(t, c, n1, id)
	last := addresses(out)[len(addresses(out))-1]
	checkAddresses(t, out, journal, 1, last)

	second := runOpenSync(t, c, n2, "", id, "--from", "1", "--name", "t2")
	out2 := second.stdout.String()
	if second.code != 0 {
		t.Fatalf("second open exited %d\nstdout:\n%s\nstderr:\n%s", second.code, out2, second.stderr.String())
	}
	checkAddresses(t, out2, journal, 1, last)
	lineWith(t, out2, fmt.Sprintf("#%d terminal t1> hello", inputSeq))
	lineWith(t, out2, regexp.QuoteMeta(reply))
	if got := attachmentCount(t, c, n2, id); got != 0 {
		t.Fatalf("%d attachments after both clients left, want 0", got)
	}
}

// TestOpenE2E_Client drives the client against a scripted runner, so every
// reply, tool call and approval is known in advance.
func TestOpenE2E_Client(t *testing.T) {
	c := testcluster.New(t, quietFleet)
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]

	t.Run("scripted transcript", func(t *testing.T) {
		id := createSessionOn(t, c, n1, "demo", scriptNode)
		scriptRunner(t, c, n2, id)
		r := runOpenSync(t, c, n1, "one\n\ntwo\n", id, "--name", "t1")
		if r.code != 0 || r.stderr.String() != "" {
			t.Fatalf("exit %d, stderr %q\nstdout:\n%s", r.code, r.stderr.String(), r.stdout.String())
		}
		want := `session ` + id + `: demo [active]
  epoch 1: echo on script
  head #2, 0 turns completed
  lease: free
  attachments: none
-- replay #1..#2
#1 session created: demo
#2 epoch 1: echo on script
CONTROLS
#3 you joined via n1
#4 lease taken by you
#5 you> one
#6 turn started for input #5 (script)
#7 agent> echo: one
#9 turn completed
#10 you> two
#11 turn started for input #10 (script)
#12 agent> echo: two
#14 turn completed
`
		// The node an attachment records is the one that applied the attach
		// (today the leader when a follower forwards it), so it is not
		// compared.
		got := regexp.MustCompile(`joined via n\d`).ReplaceAllString(r.stdout.String(), "joined via n1")
		got, block := cutControls(t, got)
		checkControls(t, c, n1, id, block, "as terminal t1",
			`input\.text +text +available`,
			`lease\.take +/take +unavailable: this attachment holds the lease \(ALREADY_HELD\); instead: type /release \(lease\.release\)`,
			`lease\.steal +/steal +unavailable: no other attachment holds the lease \(NOT_HELD_BY_OTHER\); instead: type /take \(lease\.take\)`,
			`approval\.answer +y or n +unavailable: no approval is pending \(NO_PENDING_APPROVAL\)`,
			`session\.stop +/stop \[REASON\] +available`,
			`detach +/detach +available`)
		if got != want {
			t.Fatalf("transcript:\n%s\nwant:\n%s", got, want)
		}
		if got := attachmentCount(t, c, n1, id); got != 0 {
			t.Fatalf("%d attachments after the client left, want 0", got)
		}
	})

	t.Run("approvals", func(t *testing.T) {
		id := createSessionOn(t, c, n1, "tools", scriptNode)
		scriptRunner(t, c, n1, id)
		r := runOpenSync(t, c, n2, "!tool rm -rf /\n", id, "--name", "t1")
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %q\nstdout:\n%s", r.code, r.stderr.String(), r.stdout.String())
		}
		out := r.stdout.String()
		lineWith(t, out, `#7 tool call: shell rm -rf /`)
		lineWith(t, out, `#8 approval requested: run rm -rf /\? \[y/n\]`)
		lineWith(t, out, `-- denying #8 \(--approve no\)`)
		lineWith(t, out, `#9 approval #8 denied by you: --approve no`)
		lineWith(t, out, `#10 tool result: denied: rm -rf / not run`)
		lineWith(t, out, `#11 turn completed`)

		r = runOpenSync(t, c, n3, "!tool ls\n", id, "--name", "t2", "--approve", "yes")
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %q\nstdout:\n%s", r.code, r.stderr.String(), r.stdout.String())
		}
		lineWith(t, r.stdout.String(), `#\d+ approval #\d+ approved by you: --approve yes`)
		lineWith(t, r.stdout.String(), `#\d+ tool result: ran ls`)

		// --approve ask on a pipe reads the answer from the next line.
		r = runOpenSync(t, c, n1, "!tool make\ny\n!tool make clean\nnope\n", id, "--name", "t3", "--approve", "ask")
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %q\nstdout:\n%s", r.code, r.stderr.String(), r.stdout.String())
		}
		out = r.stdout.String()
		lineWith(t, out, `#\d+ tool result: ran make`)
		lineWith(t, out, `-- expected y or n for approval #\d+, got "nope"; denying it`)
		lineWith(t, out, `#\d+ tool result: denied: make clean not run`)
		checkAddresses(t, out, readJournal(t, c, n1, id), addresses(out)[0], addresses(out)[len(addresses(out))-1])
	})

	t.Run("empty stdin observes without attaching", func(t *testing.T) {
		id := createSessionOn(t, c, n1, "watch me", scriptNode)
		r := runOpenSync(t, c, n2, "\n  \n", id)
		if r.code != 0 || r.stderr.String() != "" {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr.String())
		}
		out := r.stdout.String()
		lineWith(t, out, `#2 epoch 1: echo on script`)
		_, block := cutControls(t, out)
		checkControls(t, c, n1, id, block, "not attached: stdin had no input",
			`input\.text +text +unavailable: attach to the session first \(NOT_ATTACHED\); instead: attach`)
		if j := readJournal(t, c, n1, id); len(j) != 2 {
			t.Fatalf("observing wrote to the journal: %d events", len(j))
		}
	})

	t.Run("the lease held elsewhere", func(t *testing.T) {
		id := createSessionOn(t, c, n1, "contended", scriptNode)
		scriptRunner(t, c, n1, id)
		attachOther(t, c, n3, id, "browser", "bob", true)
		r := runOpenSync(t, c, n2, "hi\n", id, "--name", "t1")
		if r.code != 1 {
			t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout.String(), r.stderr.String())
		}
		if got, want := r.stderr.String(), "fak session open: the input lease is held by browser bob; rerun with --steal to take it\n"; got != want {
			t.Fatalf("stderr %q, want %q", got, want)
		}
		if strings.Contains(r.stdout.String(), "> hi") {
			t.Fatalf("input sent without the lease:\n%s", r.stdout.String())
		}
		r = runOpenSync(t, c, n2, "hi\n", id, "--name", "t1", "--steal")
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout.String(), r.stderr.String())
		}
		lineWith(t, r.stdout.String(), `#\d+ lease taken by you \(stolen from browser bob\)`)
		lineWith(t, r.stdout.String(), `#\d+ agent> echo: hi`)
	})

	t.Run("unknown session", func(t *testing.T) {
		r := runOpenSync(t, c, n1, "hi\n", "ses_nope")
		if r.code != 1 || r.stdout.String() != "" {
			t.Fatalf("exit %d, stdout %q", r.code, r.stdout.String())
		}
		if got, want := r.stderr.String(), "fak session open: session ses_nope not found\n"; got != want {
			t.Fatalf("stderr %q, want %q", got, want)
		}
	})

	t.Run("interactive", func(t *testing.T) {
		id := createSessionOn(t, c, n1, "chat", scriptNode)
		scriptRunner(t, c, n1, id)
		bob := attachOther(t, c, n3, id, "browser", "bob", true)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		stdin, typing := io.Pipe()
		r := startOpen(ctx, c, n2, stdin, true, id, "--name", "t1")
		defer func() { typing.Close(); r.wait(t) }()
		r.waitOutput(t, "the read-only notice", regexp.MustCompile(`(?m)^-- the input lease is held by browser bob; watching read-only \(type /steal to take it, or rerun with --steal\)$`))
		fmt.Fprintln(typing, "hello")
		r.waitOutput(t, "the refusal", regexp.MustCompile(`(?m)^-- not sent: the input lease is held by browser bob \(LEASE_NOT_HELD\); instead: type /steal \(lease\.steal\)$`))
		fmt.Fprintln(typing, "/steal")
		r.waitOutput(t, "the steal", regexp.MustCompile(`(?m)^#\d+ lease taken by you \(stolen from browser bob\)$`))
		fmt.Fprintln(typing, "hello")
		r.waitOutput(t, "the reply", regexp.MustCompile(`(?m)^#\d+ agent> echo: hello$`))
		fmt.Fprintln(typing, "!tool ls")
		r.waitOutput(t, "the approval", regexp.MustCompile(`(?m)^#\d+ approval requested: run ls\? \[y/n\]$`))
		fmt.Fprintln(typing, "y")
		r.waitOutput(t, "the tool result", regexp.MustCompile(`(?m)^#\d+ tool result: ran ls\n#\d+ turn completed$`))
		fmt.Fprintln(typing, "/release")
		r.waitOutput(t, "the release", regexp.MustCompile(`(?m)^#\d+ lease released by you \(released\)$`))
		fmt.Fprintln(typing, "again")
		r.waitOutput(t, "the refusal", regexp.MustCompile(`(?m)^-- not sent: take the input lease first \(LEASE_NOT_HELD\); instead: type /take \(lease\.take\)$`))
		// Bob takes it back and talks; the terminal sees it.
		cl := c.Sessions(n3)
		if _, err := cl.TakeLease(c.Context(10*time.Second), connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: id, AttachmentId: bob})); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Act(c.Context(10*time.Second), connect.NewRequest(&fakv1.ActRequest{SessionId: id, AttachmentId: bob, ExpectedEpoch: 1,
			Action: &fakv1.ActRequest_Input{Input: &fakv1.InputText{Text: "hi from bob"}}})); err != nil {
			t.Fatal(err)
		}
		r.waitOutput(t, "bob's input", regexp.MustCompile(`(?m)^#\d+ browser bob> hi from bob\n#\d+ turn started for input #\d+ \(script\)\n#\d+ agent> echo: hi from bob$`))
		fmt.Fprintln(typing, "/take")
		r.waitOutput(t, "the refusal", regexp.MustCompile(`(?m)^-- not done: /take: the input lease is held by browser bob \(LEASE_HELD\); instead: type /steal \(lease\.steal\)$`))
		typing.Close() // Ctrl-D
		if code := r.wait(t); code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, r.stdout.String(), r.stderr.String())
		}
		if got := attachmentCount(t, c, n1, id); got != 1 {
			t.Fatalf("%d attachments after the terminal left, want bob's only", got)
		}
		out := r.stdout.String()
		checkAddresses(t, out, readJournal(t, c, n1, id), 1, addresses(out)[len(addresses(out))-1])
	})

	// The ledger from the terminal: /reset refused while a turn runs (the
	// capability set says why), then done; /fresh; /clear, /fork and /new
	// each move the client to the new session, and so does a clear by
	// another client; /stop ends the last one and the client with it.
	t.Run("ledger commands", func(t *testing.T) {
		id := createSessionOn(t, c, n1, "ledger", scriptNode)
		scriptRunner(t, c, n1, id)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		stdin, typing := io.Pipe()
		r := startOpen(ctx, c, n2, stdin, true, id, "--name", "t1")
		defer func() { typing.Close(); r.wait(t) }()
		wait := func(what, re string) []string {
			t.Helper()
			return r.waitOutput(t, what, regexp.MustCompile(re))
		}
		fmt.Fprintln(typing, "hello")
		wait("the reply", `(?m)^#\d+ agent> echo: hello\n#\d+ turn completed$`)
		fmt.Fprintln(typing, "!tool ls")
		wait("the approval", `(?m)^#\d+ approval requested: run ls\? \[y/n\]$`)
		fmt.Fprintln(typing, "/reset")
		wait("the refused reset", `(?m)^-- not done: /reset: a turn is in flight; reset when it completes \(BUSY\)$`)
		fmt.Fprintln(typing, "y")
		wait("the tool result", `(?m)^#\d+ tool result: ran ls\n#\d+ turn completed$`)
		fmt.Fprintln(typing, "/reset")
		reset := wait("the reset", `(?m)^#(\d+) context reset: the agent's context starts after this point; provider session fak_term_\w+$`)[1]
		wait("the reset notice", `(?m)^-- context reset at #`+reset+`: the agent starts from a fresh context; the history above stays$`)
		fmt.Fprintln(typing, "/fresh")
		wait("the fresh epoch", `(?m)^#\d+ epoch 2: echo on script \(fresh: provider session fak_term_\w+, 0 cached provider entries pruned\)$`)
		wait("the fresh notice", `(?m)^-- fresh: epoch 2, provider session fak_term_\w+, 0 cached provider entries pruned \(0 is normal\)$`)
		fmt.Fprintln(typing, "after fresh")
		wait("the reply in epoch 2", `(?m)^#\d+ agent> echo: after fresh\n#\d+ turn completed$`)

		fmt.Fprintln(typing, "/clear")
		child := wait("the follow", `(?m)^-- now in (ses_\w+) \(clear of `+id+`\)$`)[1]
		scriptRunner(t, c, n1, child)
		wait("the child's lease", `(?s)-- now in `+child+`.*\n#5 lease taken by you\n`)
		out := r.stdout.String()
		stopped := lineWith(t, out, `#\d+ session stopped: USER_CLEAR; continues as `+child+` \(clear\)`)
		left := lineWith(t, out, `#\d+ you left \(detached\)`)
		followed := lineWith(t, out, `-- now in `+child+` \(clear of `+id+`\)`)
		if !(strings.Index(out, stopped) < strings.Index(out, left) && strings.Index(out, left) < strings.Index(out, followed)) {
			t.Fatalf("the old session's end is not printed before the follow:\n%s", out)
		}
		wait("the child's header", `(?m)^session `+child+`: ledger \[active\]\n  epoch 1: echo on script\n  head #3, 0 turns completed\n  lineage: clear of `+id+`\n`)
		wait("the boundary", `(?m)^#3 clear of `+id+` \(provider session fak_term_\w+\)$`)
		fmt.Fprintln(typing, "in the child")
		wait("the child's reply", `(?m)^#\d+ you> in the child\n#\d+ turn started for input #\d+ \(script\)\n#\d+ agent> echo: in the child\n#\d+ turn completed$`)

		fmt.Fprintln(typing, "/fork x")
		wait("the fork usage", `(?m)^-- usage: /fork \[SEQ\] \(fork at address SEQ, default the head\)$`)
		fmt.Fprintln(typing, "/fork 3")
		fork := wait("the fork", `(?m)^-- now in (ses_\w+) \(fork of `+child+` at #3\)$`)[1]
		wait("the fork's header and event", `(?m)^  lineage: forked from `+child+` at #3\n(?:  .*\n)*-- replay #4\.\.#4\n#4 forked from `+child+` at #3 \(3 events copied\)$`)
		wait("the fork's lease", `(?s)-- now in `+fork+`.*\n#6 lease taken by you\n`)
		fmt.Fprintln(typing, "/new")
		renewed := wait("the new", `(?m)^-- now in (ses_\w+) \(new of `+fork+`\)$`)[1]
		wait("attached to the renewed session", `(?s)-- now in `+renewed+`.*\n#5 lease taken by you\n`)

		// Another client clears the session the terminal shows: it follows.
		resp, err := c.Sessions(n3).ClearSession(c.Context(10*time.Second), connect.NewRequest(&fakv1.ClearSessionRequest{SessionId: renewed}))
		if err != nil {
			t.Fatal(err)
		}
		cleared := resp.Msg.GetBoundary().GetSession().GetSessionId()
		wait("following a clear by another client", `(?m)^-- `+renewed+` was stopped elsewhere \(USER_CLEAR\) and continues as `+cleared+`; following it\n(?:#\d+ .*\n)*-- now in `+cleared+` \(clear of `+renewed+`\)$`)
		wait("attached to the cleared session's child", `(?s)-- now in `+cleared+`.*\n#5 lease taken by you\n`)
		fmt.Fprintln(typing, "/help")
		wait("the help", `(?m)^-- .*/fresh, /reset, /clear, /new, /fork \[SEQ\] the session; `)
		fmt.Fprintln(typing, "/controls")
		wait("the controls", `(?m)^  session\.stop +/stop \[REASON\] +available$`)
		// The terminal stops the session; it detaches by itself.
		fmt.Fprintln(typing, "/stop done here")
		wait("the stop", `(?m)^#\d+ session stopped: done here\n(?:#\d+ .*\n)*-- the session is stopped; detaching$`)

		typing.Close()
		if code := r.wait(t); code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, r.stdout.String(), r.stderr.String())
		}
		for _, s := range []string{id, child, fork, renewed, cleared} {
			if got := attachmentCount(t, c, n1, s); got != 0 {
				t.Errorf("%d attachments left on %s", got, s)
			}
		}
		lineage, err := c.Sessions(n1).GetLineage(c.Context(10*time.Second), connect.NewRequest(&fakv1.GetLineageRequest{SessionId: cleared}))
		if err != nil || lineage.Msg.GetRoot() != id || len(lineage.Msg.GetNodes()) != 5 {
			t.Fatalf("lineage of %s: %v, %v", cleared, lineage, err)
		}
	})

	// Last: it stops a node. The client watches and acts through a
	// follower that goes away; it resumes through another node after the
	// last event it printed, without a gap or a duplicate.
	t.Run("reconnect", func(t *testing.T) {
		leader := c.Leader()
		followers := c.Followers()
		if leader == nil || len(followers) < 2 {
			t.Fatal("no leader with two followers")
		}
		via := followers[0]
		id := createSessionOn(t, c, leader, "roaming", scriptNode)
		scriptRunner(t, c, leader, id)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		stdin, typing := io.Pipe()
		r := startOpen(ctx, c, via, stdin, true, id, "--name", "t1")
		defer func() { typing.Close(); r.wait(t) }()
		fmt.Fprintln(typing, "before")
		r.waitOutput(t, "the first reply", regexp.MustCompile(`(?m)^#\d+ agent> echo: before\n#\d+ turn completed$`))
		c.Stop(via)
		// Writes by another client while the terminal is cut off.
		other := attachOther(t, c, leader, id, "browser", "bob", false)
		r.waitOutput(t, "bob joining", regexp.MustCompile(`(?m)^#\d+ browser bob joined`))
		if !strings.Contains(r.stderr.String(), "watch interrupted") {
			t.Fatalf("no reconnect notice on stderr: %q", r.stderr.String())
		}
		_ = other
		fmt.Fprintln(typing, "after")
		r.waitOutput(t, "the second reply", regexp.MustCompile(`(?m)^#\d+ you> after\n#\d+ turn started for input #\d+ \(script\)\n#\d+ agent> echo: after\n#\d+ turn completed$`))
		typing.Close()
		if code := r.wait(t); code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, r.stdout.String(), r.stderr.String())
		}
		out := r.stdout.String()
		checkAddresses(t, out, readJournal(t, c, leader, id), 1, addresses(out)[len(addresses(out))-1])
		if got := attachmentCount(t, c, leader, id); got != 1 {
			t.Fatalf("%d attachments after the terminal left, want bob's only", got)
		}
	})
}
