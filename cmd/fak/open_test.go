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

	"github.com/fak-dev/fak/api/apiclient"
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
		got, err := apiclient.ResolveAddr(tt.flag, getenv)
		if err != nil || got != tt.want {
			t.Errorf("apiclient.ResolveAddr(%q) with FAK_ADDR=%q = %q, %v; want %q", tt.flag, tt.env, got, err, tt.want)
		}
	}
	env["FAK_ADDR"] = ""
	if _, err := apiclient.ResolveAddr("ftp://x", getenv); err == nil {
		t.Error("ftp:// accepted")
	}

	dir := t.TempDir()
	if tok, err := apiclient.ResolveToken("", getenv, dir); err != nil || tok != "" {
		t.Errorf("no token anywhere: %q, %v", tok, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".fak-dev"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".fak-dev", "token"), []byte("devtok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, _ := apiclient.ResolveToken("", getenv, dir); tok != "devtok" {
		t.Errorf("dev token file: %q", tok)
	}
	env["FAK_TOKEN"] = "envtok"
	if tok, _ := apiclient.ResolveToken("", getenv, dir); tok != "envtok" {
		t.Errorf("FAK_TOKEN: %q", tok)
	}
	if tok, _ := apiclient.ResolveToken("flagtok", getenv, dir); tok != "flagtok" {
		t.Errorf("--token: %q", tok)
	}
	env["FAK_TOKEN"] = ""
	env["FAK_TOKEN_FILE"] = filepath.Join(dir, "missing")
	if _, err := apiclient.ResolveToken("", getenv, dir); err == nil {
		t.Error("a missing FAK_TOKEN_FILE was accepted")
	}
}
