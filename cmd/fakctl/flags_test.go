package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
)

func TestParseInterspersed(t *testing.T) {
	var opts globalOptions
	fs := newFlagSet("test", &opts)
	from := fs.Uint64("from", 1, "")
	follow := fs.Bool("follow", false, "")
	args, err := parseInterspersed(fs, []string{"--from", "3", "s-1", "--follow", "-o", "json", "--", "--not-a-flag"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(args, []string{"s-1", "--not-a-flag"}) || *from != 3 || !*follow || opts.output != "json" {
		t.Errorf("args %q from %d follow %v output %q", args, *from, *follow, opts.output)
	}
	if !flagWasSet(fs, "from") || flagWasSet(fs, "addr") {
		t.Error("flagWasSet disagrees with the command line")
	}
}

func TestGlobalsKeepEarlierValues(t *testing.T) {
	c := newCLI(nil, nil)
	rest, err := c.parseGlobals([]string{"--addr", "n1:7401", "session", "list"})
	if err != nil || !slices.Equal(rest, []string{"session", "list"}) {
		t.Fatalf("parseGlobals = %q, %v", rest, err)
	}
	// A command's flag set declares the globals again; the earlier value stays.
	fs := newFlagSet("session list", &c.opts)
	if _, err := parseInterspersed(fs, []string{"-o", "json"}); err != nil {
		t.Fatal(err)
	}
	if c.opts.addr != "n1:7401" || c.opts.output != "json" {
		t.Errorf("opts = %+v", c.opts)
	}
}

func TestFlagErrors(t *testing.T) {
	fs := newFlagSet("test", &globalOptions{})
	if _, err := parseInterspersed(fs, []string{"-h"}); err != errHelp {
		t.Errorf("-h: err = %v, want errHelp", err)
	}
	fs = newFlagSet("test", &globalOptions{})
	_, err := parseInterspersed(fs, []string{"--bogus"})
	if _, ok := err.(*usageError); !ok {
		t.Errorf("--bogus: err = %#v, want a usageError", err)
	}
}

func TestUsageAndExitCodes(t *testing.T) {
	isolateEnv(t)
	tests := []struct {
		args       []string
		wantCode   int
		wantStdout string // substring
		wantStderr string // substring
	}{
		{nil, exitUsage, "", "Usage: fakctl"},
		{[]string{"help"}, exitOK, "session log", ""},
		{[]string{"-h"}, exitOK, "bench append", ""},
		{[]string{"--help"}, exitOK, "cluster members", ""},
		{[]string{"help", "session", "append"}, exitOK, "--expected-seq N", ""},
		{[]string{"session", "log", "-h"}, exitOK, "--follow", ""},
		{[]string{"session", "--help"}, exitOK, "Subcommands:", ""},
		{[]string{"bogus"}, exitUsage, "", `Error: unknown command "bogus"`},
		{[]string{"session"}, exitUsage, "", "Error: session: missing subcommand"},
		{[]string{"session", "bogus"}, exitUsage, "", `Error: unknown command "session bogus"`},
		{[]string{"session", "describe"}, exitUsage, "", "Error: missing argument ID"},
		{[]string{"session", "describe", "a", "b"}, exitUsage, "", `Error: unexpected argument "b"`},
		{[]string{"session", "list", "--bogus"}, exitUsage, "", "Error: flag provided but not defined: -bogus"},
		{[]string{"-o", "yaml", "session", "list"}, exitUsage, "", `Error: invalid -o "yaml"`},
		{[]string{"session", "create"}, exitUsage, "", "Error: --title is required"},
		{[]string{"session", "append", "s-1", "--data", "{"}, exitUsage, "", "Error: --data is not valid JSON"},
		{[]string{"--addr", "ftp://x", "session", "list"}, exitUsage, "", "Error: invalid address"},
		{[]string{"bench", "append", "--clients", "0"}, exitUsage, "", "must be at least 1"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runContext(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout lacks %q:\n%s", tt.wantStdout, stdout.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, stderr.String())
			}
			if tt.wantCode == exitOK && stderr.Len() > 0 {
				t.Errorf("help wrote to stderr:\n%s", stderr.String())
			}
		})
	}
}

// isolateEnv keeps the caller's environment and working directory, which
// may hold a .fak-dev/token, out of a test.
func isolateEnv(t testing.TB) {
	t.Helper()
	for _, key := range []string{"FAK_ADDR", "FAK_TOKEN", "FAK_TOKEN_FILE", "FAK_CACERT", "FAK_CLIENT_CERT", "FAK_CLIENT_KEY", "FAK_TLS_SERVER_NAME"} {
		t.Setenv(key, "")
	}
	t.Chdir(t.TempDir())
}
