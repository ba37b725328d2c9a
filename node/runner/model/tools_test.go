package model

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fak-dev/fak/node/runner/runnertest"
)

func testTools(t *testing.T, max int) *tools {
	return &tools{
		enabled:   []string{ToolShell, ToolReadFile, ToolWriteFile, ToolListFiles},
		workspace: t.TempDir(), maxOutput: max,
		env: []string{"FAK_SESSION_ID=s1"},
	}
}

func runTool(t *testing.T, ts *tools, name, args string) toolResult {
	t.Helper()
	a, err := ts.check(name, args)
	if err != nil {
		return refused(err)
	}
	res, err := ts.run(context.Background(), name, a)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The shell runs in the workspace with a clean environment and reports
// how the command ended.
func TestShell(t *testing.T) {
	t.Setenv("FAK_TOKEN", "node-secret")
	ts := testTools(t, 1024)
	for _, tc := range []struct {
		cmd, want string
		ok        bool
	}{
		{`pwd`, ts.workspace + "\n", true},
		{`echo "[$FAK_TOKEN][$FAK_SESSION_ID]"`, "[][s1]\n", true},
		{`echo out; echo err >&2; exit 3`, "out\nerr\n[exit status 3]", false},
		{`printf partial; exit 1`, "partial\n[exit status 1]", false},
		{`true`, "(no output)", true},
		{`kill -9 $$`, "[signal: killed]", false},
	} {
		res := runTool(t, ts, ToolShell, `{"command":`+quoteJSON(tc.cmd)+`}`)
		if res.text != tc.want || res.ok != tc.ok || !res.ran {
			t.Errorf("%s: %q ok=%v, want %q ok=%v", tc.cmd, res.text, res.ok, tc.want, tc.ok)
		}
	}
}

// A command's output is cut in the middle, keeping its head and tail.
func TestShellOutputCapped(t *testing.T) {
	ts := testTools(t, 100)
	res := runTool(t, ts, ToolShell, `{"command":"echo BEGIN; seq 1 5000; echo END"}`)
	if !strings.HasPrefix(res.text, "BEGIN\n") || !strings.HasSuffix(res.text, "END\n") || !strings.Contains(res.text, "bytes left out here]") {
		t.Fatalf("capped output %q", res.text)
	}
	if len(res.text) > 100+80 {
		t.Fatalf("capped output is %d bytes", len(res.text))
	}
}

func TestCapWriterKeepsRunesWhole(t *testing.T) {
	for _, total := range []int{0, 5, 10, 11, 37, 1000} {
		w := newCapWriter(10)
		in := strings.Repeat("é", total) // 2 bytes each
		for _, c := range []byte(in) {
			_, _ = w.Write([]byte{c})
		}
		got := w.String()
		if !utf8.ValidString(got) || strings.ContainsRune(got, utf8.RuneError) {
			t.Fatalf("%d runes: %q is not clean UTF-8", total, got)
		}
		if len(in) <= 10 && got != in {
			t.Fatalf("%d runes: %q, want all of it", total, got)
		}
	}
}

func TestReadFile(t *testing.T) {
	ts := testTools(t, 16)
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(ts.workspace, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("short", "fits")
	write("long", strings.Repeat("x", 40))
	write("bin", "a\x00b")
	if err := os.Mkdir(filepath.Join(ts.workspace, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args, want string
		ok         bool
	}{
		{`{"path":"short"}`, "fits", true},
		{`{"path":"long"}`, strings.Repeat("x", 16) + "\n[output cut: the first 16 of 40 bytes are shown]", true},
		{`{"path":"bin"}`, "bin is a binary file of 3 bytes; not shown", true},
		{`{"path":"dir"}`, "error: dir is a directory (list_files lists it)", false},
		{`{"path":"nope"}`, "error: statat nope: no such file or directory", false},
		{`{}`, "refused: read_file needs a path", false},
		{`not json`, "refused: the arguments are not a JSON object: invalid character 'o' in literal null (expecting 'u')", false},
	} {
		if res := runTool(t, ts, ToolReadFile, tc.args); res.text != tc.want || res.ok != tc.ok {
			t.Errorf("%s: %q ok=%v, want %q ok=%v", tc.args, res.text, res.ok, tc.want, tc.ok)
		}
	}
}

func TestCheckRefusesUnknownTools(t *testing.T) {
	ts := testTools(t, 16)
	ts.enabled = []string{ToolReadFile}
	for _, name := range []string{ToolShell, "rm_rf"} {
		if _, err := ts.check(name, `{"command":"ls"}`); err == nil || !strings.Contains(err.Error(), `there is no tool "`+name+`"`) {
			t.Errorf("%s: %v", name, err)
		}
	}
	ts.workspace = ""
	if _, err := ts.check(ToolReadFile, `{"path":"a"}`); err == nil {
		t.Error("a file tool ran without a workspace")
	}
}

func quoteJSON(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// The shell tool runs in the runtime's sandbox: with bwrap, the hidden
// tokens file is empty and nothing outside the workspace is writable.
func TestShellSandboxed(t *testing.T) {
	runnertest.NeedTool(t, "bwrap", "bubblewrap")
	ts := testTools(t, 1024)
	sec := runnertest.NewSecrets(t)
	tokens, outside := sec.Tokens, sec.Outside
	cmd := `{"command":"cat ` + tokens + `; echo x > ` + filepath.Join(outside, "x") + `; echo y > inside; echo done"}`
	if res := runTool(t, ts, ToolShell, cmd); !strings.Contains(res.text, runnertest.SecretToken) {
		t.Fatalf("unsandboxed, the shell cannot read the file to hide: %q", res.text)
	}
	if err := os.Remove(filepath.Join(outside, "x")); err != nil {
		t.Fatal(err)
	}
	ts.sandbox, ts.hide = "bwrap", []string{tokens}
	res := runTool(t, ts, ToolShell, cmd)
	if strings.Contains(res.text, runnertest.SecretToken) || !strings.Contains(res.text, "done") {
		t.Fatalf("sandboxed shell: %q", res.text)
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); !os.IsNotExist(err) {
		t.Fatalf("the sandboxed shell wrote outside its workspace: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(ts.workspace, "inside")); err != nil || string(b) != "y\n" {
		t.Fatalf("the workspace is not writable: %q %v", b, err)
	}
}
