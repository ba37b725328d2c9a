package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzConfigFile: an agent's config file, HCL or JSON, is read at start
// and its problems are reported before anything runs. Whatever the bytes,
// reading them never panics; the outcome is the same every time (flags
// set, blocks decoded, the error's text: the agent decides the same on
// every start); and every problem reported names the file, so the
// operator is sent to the line.
func FuzzConfigFile(f *testing.F) {
	for _, seed := range []string{
		"name = \"n1\"\ndata_dir = \"/var/lib/fak\"\nbootstrap_expect = 3\nvoter = false\njoin = [\"a:1\", \"b:2\"]\nlabel = { zone = \"a\" }\n",
		"runtime \"gpt\" {\n  adapter = \"model\"\n  endpoint = \"http://127.0.0.1:1/v1\"\n  model = \"m\"\n  account_ref = \"a\"\n  price = { input_per_mtok = 2.0, output_per_mtok = 8.0 }\n}\naccount \"a\" { api_key_env = \"K\" }\n",
		"runtime \"sh\" {\n  adapter = \"exec\"\n  command = [\"/bin/sh\", \"-c\", \"cat\"]\n  protocol = \"text\"\n  turn_timeout = \"30m\"\n}\n",
		"price \"gpt-*\" {\n  input_per_mtok = 1\n}\n",
		"runtime \"x\" { adapter = \"nope\" }\n",
		"nmae = \"typo\"\n",
		"capacity = -1\n",
		"bogus { }\n",
		"name = ${var}\n",
		`{"name": "n1", "join": ["a:1"], "runtime": {"sh": {"adapter": "exec", "command": ["cat"]}}}`,
		`{"runtime": {"x": [{"adapter": 1}]}}`,
		"\x00\xff",
	} {
		f.Add([]byte(seed), strings.HasPrefix(seed, "{"))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, src []byte, asJSON bool) {
		path := filepath.Join(dir, "fak.hcl")
		if asJSON {
			path = filepath.Join(dir, "fak.json")
		}
		if err := os.WriteFile(path, src, 0o600); err != nil {
			t.Fatal(err)
		}
		read := func() (*testAgentFlags, *configBlocks, string) {
			flags := newTestAgentFlags()
			blocks, err := applyConfigFile(flags.fs, path)
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			return flags, blocks, msg
		}
		f1, b1, e1 := read()
		f2, b2, e2 := read()
		if e1 != e2 {
			t.Fatalf("two reads disagree:\n%s\n---\n%s", e1, e2)
		}
		if !reflect.DeepEqual(b1, b2) || f1.name != f2.name || !reflect.DeepEqual(f1.join, f2.join) || f1.capacity != f2.capacity {
			t.Fatalf("two reads decoded differently: %+v / %+v", b1, b2)
		}
		for line := range strings.SplitSeq(e1, "\n") {
			if line != "" && !strings.Contains(line, path) {
				t.Fatalf("a problem that does not name the file: %q", line)
			}
		}
	})
}
