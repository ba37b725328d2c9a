package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// testAgentFlags is a flag set with one flag of each kind the agent has.
type testAgentFlags struct {
	fs        *flag.FlagSet
	out       bytes.Buffer
	name      string
	dataDir   string
	expect    int
	voter     bool
	grace     time.Duration
	threshold uint64
	capacity  uint32
	join      stringList
	gossipKey stringList
	labels    labelFlag
}

func newTestAgentFlags() *testAgentFlags {
	t := &testAgentFlags{fs: flag.NewFlagSet("fak agent", flag.ContinueOnError)}
	t.fs.SetOutput(&t.out)
	t.fs.StringVar(&t.name, "name", "", "")
	t.fs.StringVar(&t.dataDir, "data-dir", "", "")
	t.fs.IntVar(&t.expect, "bootstrap-expect", 0, "")
	t.fs.BoolVar(&t.voter, "voter", true, "")
	t.fs.DurationVar(&t.grace, "dead-server-grace", time.Hour, "")
	t.fs.Uint64Var(&t.threshold, "snapshot-threshold", 8192, "")
	t.fs.Var(uint32Value{&t.capacity}, "capacity", "")
	t.fs.Var(&t.join, "join", "")
	t.fs.Var(&t.gossipKey, "gossip-key", "")
	t.fs.Var(&t.labels, "label", "")
	return t
}

func writeConfig(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkGoodConfig asserts the settings both the HCL and the JSON test files
// hold.
func checkGoodConfig(t *testing.T, f *testAgentFlags) {
	t.Helper()
	if f.name != "n1" || f.dataDir != "/var/lib/fak" || f.expect != 3 || f.voter ||
		f.grace != 90*time.Second || f.threshold != 100000 || f.capacity != 12 {
		t.Errorf("scalars: name=%q data_dir=%q expect=%d voter=%v grace=%v threshold=%d capacity=%d",
			f.name, f.dataDir, f.expect, f.voter, f.grace, f.threshold, f.capacity)
	}
	if want := []string{"10.0.0.2:7601", "10.0.0.3:7601"}; !slices.Equal(f.join, want) {
		t.Errorf("join = %q, want %q", f.join, want)
	}
	if want := []string{"only"}; !slices.Equal(f.gossipKey, want) {
		t.Errorf("gossip_key = %q, want %q", f.gossipKey, want)
	}
	if got := f.labels.String(); got != "gpu=true,zone=a" {
		t.Errorf("label = %q, want gpu=true,zone=a", got)
	}
}

func TestConfigHCL(t *testing.T) {
	path := writeConfig(t, "fak.hcl", `
# a comment
name              = "n1"
data_dir          = "/var/lib/fak"
bootstrap_expect  = 3
voter             = false
dead_server_grace = "90s"
snapshot_threshold = 100000
capacity          = 12
join              = ["10.0.0.2:7601", "10.0.0.3:7601"]
gossip_key        = "only"          // a single value for a repeatable flag
label             = { zone = "a", gpu = true }
`)
	f := newTestAgentFlags()
	if err := parseAgentFlags(f.fs, []string{"--config", path}); err != nil {
		t.Fatalf("parse: %v\n%s", err, f.out.String())
	}
	checkGoodConfig(t, f)
}

func TestConfigJSON(t *testing.T) {
	path := writeConfig(t, "fak.json", `{
  "name": "n1",
  "data_dir": "/var/lib/fak",
  "bootstrap_expect": 3,
  "voter": false,
  "dead_server_grace": "90s",
  "snapshot_threshold": 100000,
  "capacity": "12",
  "join": ["10.0.0.2:7601", "10.0.0.3:7601"],
  "gossip_key": ["only"],
  "label": ["zone=a", "gpu=true"]
}`)
	f := newTestAgentFlags()
	if err := parseAgentFlags(f.fs, []string{"--config", path}); err != nil {
		t.Fatalf("parse: %v\n%s", err, f.out.String())
	}
	checkGoodConfig(t, f)
}

func TestConfigCommandLineWins(t *testing.T) {
	path := writeConfig(t, "fak.hcl", `
name     = "from-file"
data_dir = "/from/file"
join     = ["file-1:7601", "file-2:7601"]
label    = { zone = "file" }
voter    = false
`)
	f := newTestAgentFlags()
	args := []string{"--name", "cli", "--config", path, "--join", "cli:7601", "--voter=true"}
	if err := parseAgentFlags(f.fs, args); err != nil {
		t.Fatalf("parse: %v\n%s", err, f.out.String())
	}
	if f.name != "cli" || !f.voter {
		t.Errorf("name=%q voter=%v: the command line should win", f.name, f.voter)
	}
	if f.dataDir != "/from/file" || f.labels.String() != "zone=file" {
		t.Errorf("data_dir=%q label=%q: the file should set what the command line did not", f.dataDir, f.labels.String())
	}
	if want := []string{"cli:7601"}; !slices.Equal(f.join, want) {
		t.Errorf("join = %q, want %q: command-line values replace the file's", f.join, want)
	}
}

// configErrors parses a file that must fail and returns what was printed.
func configErrors(t *testing.T, name, text string, args ...string) (string, string) {
	t.Helper()
	path := writeConfig(t, name, text)
	f := newTestAgentFlags()
	if err := parseAgentFlags(f.fs, append([]string{"--config", path}, args...)); err == nil {
		t.Fatalf("parse of %s succeeded, want an error", text)
	}
	return f.out.String(), path
}

func TestConfigUnknownKey(t *testing.T) {
	out, path := configErrors(t, "fak.hcl", "name = \"n1\"\n\nlabels = { zone = \"a\" }\ndata-dir = \"/x\"\nfrobnicate = 1\n")
	for _, want := range []string{
		path + ":3: unknown key labels (did you mean label?)",
		path + ":4: unknown key data-dir (did you mean data_dir?)",
		path + ":5: unknown key frobnicate\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, path = configErrors(t, "fak.json", "{\n  \"name\": \"n1\",\n  \"bootstrap_expct\": 3\n}")
	if want := path + ":3: unknown key bootstrap_expct (did you mean bootstrap_expect?)"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

func TestConfigBadValue(t *testing.T) {
	tests := []struct{ text, want string }{
		{"name = \"n1\"\nbootstrap_expect = \"three\"", `:2: bootstrap_expect = "three": parse error; want an integer`},
		{"\n\ndead_server_grace = 30", `:3: dead_server_grace = "30": parse error; want a duration`},
		{"voter = \"maybe\"", `:1: voter = "maybe": parse error; want true or false`},
		{"capacity = -1", `:1: capacity = "-1": want a number of sessions`},
		{"label = [\"zone\"]", `:1: label = "zone": want key=value, got "zone"`},
		{"name = [\"a\", \"b\"]", `:1: name: takes one value, got a list`},
		{"join = { a = \"b\" }", `:1: join: takes no object`},
		{"join = [[\"a\"]]", `:1: join: list element: want a string, number or bool`},
		{"name = null", `:1: name: want a value, got null`},
		{"name = var.x", `:1: Variables not allowed`},
		{"label {\n  zone = \"a\"\n}", `:1: Unexpected "label" block`},
		{"name = \"n1\"\nname = \"n2\"", `:2: Attribute redefined`},
		{"name = ", `:1: `},
		{"config = \"other.hcl\"", `:1: config: --config cannot be set in a config file`},
	}
	for _, tt := range tests {
		out, path := configErrors(t, "fak.hcl", tt.text)
		if !strings.Contains(out, "fak agent: "+path+tt.want) {
			t.Errorf("%q: output lacks %q:\n%s", tt.text, path+tt.want, out)
		}
	}
}

func TestConfigFileProblems(t *testing.T) {
	f := newTestAgentFlags()
	missing := filepath.Join(t.TempDir(), "nope.hcl")
	if err := parseAgentFlags(f.fs, []string{"--config", missing}); err == nil {
		t.Fatal("a missing config file was accepted")
	}
	if want := "fak agent: config: open " + missing + ": no such file or directory"; !strings.Contains(f.out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, f.out.String())
	}

	path := writeConfig(t, "fak.hcl", `name = "n1"`)
	f = newTestAgentFlags()
	if err := parseAgentFlags(f.fs, []string{"--config", path, "--config", path}); err == nil {
		t.Fatal("--config twice was accepted")
	}
	if want := "given more than once"; !strings.Contains(f.out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, f.out.String())
	}
}

// agentConfigCheck runs the real `fak agent` with --config path and a stray
// argument: the file is applied right after the flags are parsed, and the
// stray argument then stops the agent before it starts anything, so the
// output holds the file's errors, if any, and then the stray argument's.
func agentConfigCheck(t *testing.T, path string) string {
	t.Helper()
	var stderr bytes.Buffer
	code := runAgent([]string{"--config", path, "stop-here"}, io.Discard, &stderr)
	if code != 2 {
		t.Fatalf("fak agent exited %d, want 2 (usage)\n%s", code, stderr.String())
	}
	return stderr.String()
}

// TestDeployConfigParses keeps deploy/fak.hcl in step with the agent's
// flags: every key in it must be a flag that takes its value.
func TestDeployConfigParses(t *testing.T) {
	path := filepath.Join("..", "..", "deploy", "fak.hcl")
	out := agentConfigCheck(t, path)
	if strings.Contains(out, path) || !strings.Contains(out, `unexpected argument "stop-here"`) {
		t.Errorf("deploy/fak.hcl does not parse against the agent's flags:\n%s", out)
	}
	// The check can fail: a bad file does not get as far.
	bad := writeConfig(t, "bad.hcl", "name = \"n1\"\nno_such_flag = 1\n")
	if out := agentConfigCheck(t, bad); !strings.Contains(out, bad+":2: unknown key no_such_flag") ||
		strings.Contains(out, "unexpected argument") {
		t.Errorf("a bad file was not reported:\n%s", out)
	}
}

// retain_stopped takes whole days or a duration, in the file or on the
// command line; anything else names what to write.
func TestRetainStoppedTakesDays(t *testing.T) {
	for in, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "720h": 720 * time.Hour, "0": 0, "90m": 90 * time.Minute} {
		var d time.Duration
		if err := (retentionValue{&d}).Set(in); err != nil || d != want {
			t.Errorf("%q: %v, %v; want %v", in, d, err, want)
		}
	}
	for _, bad := range []string{"30", "-1h", "1.5d", "d", "thirty days"} {
		var d time.Duration
		if err := (retentionValue{&d}).Set(bad); err == nil || !strings.Contains(err.Error(), `"30d"`) {
			t.Errorf("%q: accepted as %v (%v)", bad, d, err)
		}
	}
	var d time.Duration
	fs := flag.NewFlagSet("fak agent", flag.ContinueOnError)
	fs.Var(retentionValue{&d}, "retain-stopped", "")
	if _, err := applyConfigFile(fs, writeConfig(t, "fak.hcl", "retain_stopped = \"30d\"\n")); err != nil || d != 30*24*time.Hour {
		t.Fatalf("retain_stopped = \"30d\" in a file: %v, %v", d, err)
	}
}
