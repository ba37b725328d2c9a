package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

func TestParseOpenArgs(t *testing.T) {
	tests := []struct {
		args []string
		want openOptions
	}{
		{[]string{"ses_1"}, openOptions{sessionID: "ses_1"}},
		{[]string{"ses_1", "--steal", "--from", "7", "--name", "me@box", "--approve", "yes"},
			openOptions{sessionID: "ses_1", steal: true, from: 7, name: "me@box", approve: "yes"}},
		{[]string{"--addr", "http://n2:7402", "ses_1", "--token=t"},
			openOptions{sessionID: "ses_1", addr: "http://n2:7402", token: "t"}},
		{[]string{"--steal", "--", "-odd-id"}, openOptions{sessionID: "-odd-id", steal: true}},
	}
	for _, tt := range tests {
		got, err := parseOpenArgs(tt.args, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%q: got %+v, want %+v", tt.args, got, tt.want)
		}
	}

	bad := map[string][]string{
		"a session ID is required":               {"--steal"},
		"one session ID expected, got 2":         {"a", "b"},
		"invalid value \"0\" for flag -from":     {"a", "--from", "0"},
		"invalid value \"maybe\" for flag -appr": {"a", "--approve", "maybe"},
		"flag provided but not defined: -nope":   {"a", "--nope"},
	}
	for want, args := range bad {
		var stderr bytes.Buffer
		_, err := parseOpenArgs(args, &stderr)
		if err == nil {
			t.Errorf("%q: no error", args)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %q, want it to contain %q", args, err, want)
		}
	}
	if _, err := parseOpenArgs([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
}

func TestRunOpenUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"a", "b"}, {"a", "--from", "x"}, {"a", "--addr", "ftp://x"}} {
		var stdout, stderr bytes.Buffer
		code := runOpen(context.Background(), args, sessionIO{
			stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
			getenv: func(string) string { return "" }, workDir: t.TempDir(),
		})
		if code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", args, code, stderr.String())
		}
		if stdout.Len() != 0 || stderr.Len() == 0 {
			t.Errorf("%q: stdout %q, stderr %q", args, stdout.String(), stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := runOpen(context.Background(), []string{"-h"}, sessionIO{stdout: &stdout, stderr: &stderr}); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
	if !strings.Contains(stderr.String(), "Usage: fak session open ID [flags]") || !strings.Contains(stderr.String(), "-approve ask|yes|no") {
		t.Errorf("-h printed:\n%s", stderr.String())
	}
}

func TestRunOpenUnreachable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := runOpen(context.Background(), []string{"ses_1", "--addr", "127.0.0.1:1"}, sessionIO{
		stdin: strings.NewReader("hi\n"), stdout: &stdout, stderr: &stderr,
		getenv: func(string) string { return "" }, workDir: t.TempDir(),
	})
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "fak session open: describe ses_1: ") {
		t.Fatalf("stderr %q, want one line about the describe", stderr.String())
	}
}

func TestRunSessionRouting(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runSession(nil, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "open ") {
		t.Errorf("no command: exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := runSession([]string{"shut"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `unknown command "shut"`) {
		t.Errorf("unknown: exit %d, stderr %q", code, stderr.String())
	}
	if code := runSession([]string{"help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "Usage: fak session") {
		t.Errorf("help: exit %d, stdout %q", code, stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "session ") {
		t.Errorf("fak help does not list session: %q", stdout.String())
	}
}

func TestResolveAPIAddrAndToken(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	for _, tt := range []struct{ flag, env, want string }{
		{"", "", "http://127.0.0.1:7401"},
		{"", "n2:7402", "http://n2:7402"},
		{"https://n3:7403/", "n2:7402", "https://n3:7403"},
		{":7405", "", "http://127.0.0.1:7405"},
	} {
		env["FAK_ADDR"] = tt.env
		got, err := resolveAPIAddr(tt.flag, getenv)
		if err != nil || got != tt.want {
			t.Errorf("resolveAPIAddr(%q) with FAK_ADDR=%q = %q, %v; want %q", tt.flag, tt.env, got, err, tt.want)
		}
	}
	env["FAK_ADDR"] = ""
	if _, err := resolveAPIAddr("ftp://x", getenv); err == nil {
		t.Error("ftp:// accepted")
	}
	if got, err := normalizeAPIAddr("10.0.0.2:7402", "https"); err != nil || got != "https://10.0.0.2:7402" {
		t.Errorf("endpoint with scheme https = %q, %v", got, err)
	}

	dir := t.TempDir()
	if tok, err := resolveAPIToken("", getenv, dir); err != nil || tok != "" {
		t.Errorf("no token anywhere: %q, %v", tok, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".fak-dev"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".fak-dev", "token"), []byte("devtok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, _ := resolveAPIToken("", getenv, dir); tok != "devtok" {
		t.Errorf("dev token file: %q", tok)
	}
	env["FAK_TOKEN"] = "envtok"
	if tok, _ := resolveAPIToken("", getenv, dir); tok != "envtok" {
		t.Errorf("FAK_TOKEN: %q", tok)
	}
	if tok, _ := resolveAPIToken("flagtok", getenv, dir); tok != "flagtok" {
		t.Errorf("--token: %q", tok)
	}
	env["FAK_TOKEN"] = ""
	env["FAK_TOKEN_FILE"] = filepath.Join(dir, "missing")
	if _, err := resolveAPIToken("", getenv, dir); err == nil {
		t.Error("a missing FAK_TOKEN_FILE was accepted")
	}
}

func TestTracker(t *testing.T) {
	var tr tracker
	tr.init(&fakv1.DescribeSessionResponse{Session: &fakv1.Session{
		Epoch: 1, HeadSeq: 10,
		Pending: &fakv1.PendingInteraction{QueuedInputs: []uint64{9}, TurnInputSeq: 7, ApprovalSeq: 8},
		Lease:   &fakv1.Lease{AttachmentId: "att_a", ClientKind: "browser", ClientName: "alice", ExpiresUnixNano: time.Now().Add(time.Minute).UnixNano()},
	}}, time.Now())
	tr.replayed(event(10, "approval.answered", "", m{"approval_seq": 8, "approved": true}))
	if tr.answerable() {
		t.Fatal("approval #8 answered in the replay is still answerable")
	}
	if tr.holderName() != "browser alice" {
		t.Fatalf("holder %q", tr.holderName())
	}
	for _, ev := range []*fakv1.Event{
		event(11, "tool.result", "ok", nil),
		event(12, "turn.completed", "", nil),
		event(13, "input", "b", nil),
		event(14, "turn.started", "", nil), // the oldest queued input: #9
	} {
		tr.apply(ev)
	}
	if tr.completed[7] != "completed" || tr.turn != 9 || len(tr.queue) != 1 || tr.queue[0] != 13 {
		t.Fatalf("after turn of #7: completed %v, turn %d, queue %v", tr.completed, tr.turn, tr.queue)
	}
	for _, ev := range []*fakv1.Event{
		event(15, "approval.requested", "run?", nil),
		event(16, "lease.released", "", m{"attachment_id": "att_a", "reason": "expired"}),
		event(17, "epoch.changed", "", m{"epoch": 2}),
	} {
		tr.apply(ev)
	}
	if !tr.answerable() || tr.approval != 15 || tr.approvalTurn != 9 || tr.holderName() != "nobody" || tr.epoch != 2 {
		t.Fatalf("approval %d (turn %d, answerable %v), holder %q, epoch %d", tr.approval, tr.approvalTurn, tr.answerable(), tr.holderName(), tr.epoch)
	}
	tr.apply(event(18, "turn.completed", "", nil))
	// A runner that names the input is believed over queue order.
	tr.apply(event(19, "input", "c", nil))
	tr.apply(event(20, "turn.started", "", m{"input_seq": 19}))
	if tr.turn != 19 || len(tr.queue) != 1 || tr.queue[0] != 13 || tr.answerable() {
		t.Fatalf("turn %d, queue %v", tr.turn, tr.queue)
	}
	tr.apply(event(21, "turn.completed", "interrupted", m{"status": "interrupted", "input_seq": 19}))
	tr.apply(event(22, "input", "d", nil))
	tr.apply(event(23, "reset_boundary", "context reset", m{"cleared_inputs": []uint64{13, 22}}))
	if tr.completed[19] != "interrupted" || !strings.Contains(tr.completed[22], "reset") || len(tr.queue) != 0 {
		t.Fatalf("completed %v, queue %v", tr.completed, tr.queue)
	}
	tr.apply(event(24, "session.stopped", "bye", nil))
	if !tr.stopped || tr.stopReason != "bye" || tr.child != "" {
		t.Fatal("stop not tracked")
	}
	var cleared tracker
	cleared.init(&fakv1.DescribeSessionResponse{Session: &fakv1.Session{Epoch: 1}}, time.Now())
	cleared.apply(event(5, "session.stopped", "PROVIDER_SESSION_CLEAR", m{"child": "ses_c", "source": "clear"}))
	if !cleared.stopped || cleared.child != "ses_c" || cleared.childSource != "clear" {
		t.Fatalf("a clear's child not tracked: %+v", cleared)
	}
}

func TestReadLines(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	var got []string
	for l := range readLines(strings.NewReader("a\r\nb\n\nlast"), done) {
		got = append(got, l)
	}
	if strings.Join(got, "|") != "a|b||last" {
		t.Fatalf("lines %q", got)
	}
	line, ok := nextInputLine(context.Background(), readLines(strings.NewReader("\n  \nx\n"), done))
	if !ok || line != "x" {
		t.Fatalf("nextInputLine = %q, %v", line, ok)
	}
	if _, ok := nextInputLine(context.Background(), readLines(strings.NewReader("\n"), done)); ok {
		t.Fatal("a blank stdin has input")
	}
}
