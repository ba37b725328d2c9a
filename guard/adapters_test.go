package guard

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fak-dev/fak/internal/tomlquote"
)

const testExe = "/opt/fak/bin/fak"

func newTestLaunch(t *testing.T, provider string, args ...string) *Launch {
	t.Helper()
	return &Launch{Provider: provider, RunDir: t.TempDir(), Exe: testExe, Cwd: t.TempDir(),
		Args: args, Env: []string{"HOME=/home/u", "PATH=/usr/bin"}}
}

func readJSONFile(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
	return v
}

// canon re-encodes v so structures compare independent of Go types.
func canon(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	json.Unmarshal(b, &x)
	b, _ = json.Marshal(x)
	return string(b)
}

func TestHookCommandQuotes(t *testing.T) {
	if got := HookCommand("/usr/local/bin/fak", EventSessionStart, "claude"); got != "/usr/local/bin/fak guard-sessionstart --provider claude" {
		t.Errorf("plain path: %q", got)
	}
	if got := HookCommand("/Users/a b/it's/fak", EventSessionEnd, "my tool"); got != `'/Users/a b/it'\''s/fak' guard-sessionend --provider 'my tool'` {
		t.Errorf("quoted path: %q", got)
	}
}

func TestAdapterFor(t *testing.T) {
	for _, p := range []string{"claude", "codex", "gemini"} {
		if AdapterFor(p) == nil {
			t.Errorf("no adapter for %s", p)
		}
	}
	if AdapterFor("mytool") != nil {
		t.Error("a generic provider must get no injection")
	}
	if got := ProviderFor("/usr/local/bin/codex"); got != "codex" {
		t.Errorf("ProviderFor = %q", got)
	}
}

func TestClaudeSettingsFile(t *testing.T) {
	l := newTestLaunch(t, "claude", "claude", "--model", "opus", "-p", "hi")
	if err := (claudeAdapter{}).Prepare(l); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(l.RunDir, claudeSettingsFile)
	if want := []string{"claude", "--settings", path, "--model", "opus", "-p", "hi"}; !reflect.DeepEqual(l.Args, want) {
		t.Fatalf("args = %q, want %q", l.Args, want)
	}
	want := `{"hooks":{` +
		`"SessionEnd":[{"hooks":[{"command":"/opt/fak/bin/fak guard-sessionend --provider claude","timeout":3,"type":"command"}]}],` +
		`"SessionStart":[{"hooks":[{"command":"/opt/fak/bin/fak guard-sessionstart --provider claude","timeout":5,"type":"command"}]}]}}`
	if got := canon(t, readJSONFile(t, path)); got != want {
		t.Fatalf("settings\n got %s\nwant %s", got, want)
	}
}

func TestClaudeMergesTheUsersSettings(t *testing.T) {
	userHook := map[string]any{"matcher": "startup", "hooks": []any{map[string]any{"type": "command", "command": "echo user"}}}
	user := map[string]any{"model": "opus", "hooks": map[string]any{"SessionStart": []any{userHook}}}
	for _, form := range []string{"file", "file=", "inline"} {
		t.Run(form, func(t *testing.T) {
			l := newTestLaunch(t, "claude")
			b, _ := json.Marshal(user)
			var args []string
			switch form {
			case "file", "file=":
				os.WriteFile(filepath.Join(l.Cwd, "mine.json"), b, 0o600)
				if form == "file" {
					args = []string{"claude", "--resume", "--settings", "mine.json", "-p", "x"}
				} else {
					args = []string{"claude", "--resume", "--settings=mine.json", "-p", "x"}
				}
			case "inline":
				args = []string{"claude", "--resume", "--settings", string(b), "-p", "x"}
			}
			l.Args = args
			if err := (claudeAdapter{}).Prepare(l); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(l.RunDir, claudeSettingsFile)
			if want := []string{"claude", "--settings", path, "--resume", "-p", "x"}; !reflect.DeepEqual(l.Args, want) {
				t.Fatalf("args = %q, want %q", l.Args, want)
			}
			got := readJSONFile(t, path)
			if got["model"] != "opus" {
				t.Errorf("the user's settings were lost: %v", got)
			}
			starts := got["hooks"].(map[string]any)["SessionStart"].([]any)
			if len(starts) != 2 || canon(t, starts[0]) != canon(t, userHook) ||
				!strings.Contains(canon(t, starts[1]), "guard-sessionstart --provider claude") {
				t.Fatalf("SessionStart groups = %s, want the user's then the guard's", canon(t, starts))
			}
		})
	}
	l := newTestLaunch(t, "claude", "claude", "--settings", "missing.json")
	if err := (claudeAdapter{}).Prepare(l); err == nil {
		t.Fatal("a --settings file that does not exist must fail the launch, not be dropped")
	}
}

func TestCodexFlags(t *testing.T) {
	l := newTestLaunch(t, "codex", "codex", "exec", "hello")
	if err := (codexAdapter{}).Prepare(l); err != nil {
		t.Fatal(err)
	}
	cmd := "/opt/fak/bin/fak guard-sessionstart --provider codex"
	identity := `{"event_name":"session_start","hooks":[{"async":false,"command":"` + cmd + `","timeout":5,"type":"command"}]}`
	sum := sha256.Sum256([]byte(identity))
	hash := "sha256:" + hex.EncodeToString(sum[:])
	want := []string{"codex",
		"-c", `hooks.SessionStart=[{hooks=[{type="command",command="` + cmd + `",timeout=5}]}]`,
		"-c", `hooks.state={"/<session-flags>/config.toml:session_start:0:0"={enabled=true,trusted_hash="` + hash + `"}}`,
		"exec", "hello"}
	if !reflect.DeepEqual(l.Args, want) {
		t.Fatalf("args\n got %q\nwant %q", l.Args, want)
	}
	for _, a := range l.Args {
		if strings.Contains(a, "bypass") {
			t.Fatalf("a trust-all bypass was passed: %q", a)
		}
	}
}

func TestCodexHookHashIsCanonical(t *testing.T) {
	// No HTML escaping (serde_json writes < > & as they are), quotes and
	// backslashes escaped, keys sorted, compact.
	cmd := `'/tmp/a<b>&"c\'/fak' guard-sessionstart --provider codex`
	identity := `{"event_name":"session_start","hooks":[{"async":false,"command":"'/tmp/a<b>&\"c\\'/fak' guard-sessionstart --provider codex","timeout":7,"type":"command"}]}`
	sum := sha256.Sum256([]byte(identity))
	if got, want := CodexHookHash(cmd, 7), "sha256:"+hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("hash = %s, want %s", got, want)
	}
	if CodexHookHash(cmd, 7) == CodexHookHash(cmd+" ", 7) {
		t.Fatal("a changed command must change the hash")
	}
}

func TestTOMLString(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:       `"plain"`,
		`a"b\c`:       `"a\"b\\c"`,
		"tab\there\n": `"tab\there\n"`,
		"\x01é":       `"\u0001é"`,
	} {
		if got := tomlquote.String(in); got != want {
			t.Errorf("tomlquote.String(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestGeminiSystemDefaultsCopy(t *testing.T) {
	l := newTestLaunch(t, "gemini", "gemini", "-m", "gemini-3-pro")
	base := filepath.Join(t.TempDir(), "system-defaults.json")
	os.WriteFile(base, []byte(`// machine defaults
{
  "general": {"vimMode": true}, /* keep */
  "url": "http://example.invalid/a//b",
  "hooks": {"SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo admin"}]}]}
}
`), 0o644)
	l.Env = append(l.Env, geminiDefaultsEnv+"="+base)
	if err := (geminiAdapter{}).Prepare(l); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(l.RunDir, geminiDefaultsFile)
	if got, _ := lookupEnv(l.Env, geminiDefaultsEnv); got != path {
		t.Fatalf("%s = %q, want %q", geminiDefaultsEnv, got, path)
	}
	if n := strings.Count(strings.Join(l.Env, "\n"), geminiDefaultsEnv+"="); n != 1 {
		t.Fatalf("%d %s entries in the environment", n, geminiDefaultsEnv)
	}
	if !reflect.DeepEqual(l.Args, []string{"gemini", "-m", "gemini-3-pro"}) {
		t.Fatalf("args changed: %q", l.Args)
	}
	want := `{"general":{"vimMode":true},"hooks":{` +
		`"SessionEnd":[{"hooks":[{"command":"/opt/fak/bin/fak guard-sessionend --provider gemini","name":"fak-guard-sessionend","timeout":5000,"type":"command"}]}],` +
		`"SessionStart":[{"hooks":[{"command":"echo admin","type":"command"}],"matcher":"startup"},` +
		`{"hooks":[{"command":"/opt/fak/bin/fak guard-sessionstart --provider gemini","name":"fak-guard-sessionstart","timeout":5000,"type":"command"}]}]},` +
		`"url":"http://example.invalid/a//b"}`
	if got := canon(t, readJSONFile(t, path)); got != want {
		t.Fatalf("defaults\n got %s\nwant %s", got, want)
	}
}

func TestGeminiWithoutSystemDefaults(t *testing.T) {
	l := newTestLaunch(t, "gemini", "gemini")
	l.Env = append(l.Env, geminiDefaultsEnv+"="+filepath.Join(t.TempDir(), "none.json"))
	if err := (geminiAdapter{}).Prepare(l); err != nil {
		t.Fatal(err)
	}
	got := readJSONFile(t, filepath.Join(l.RunDir, geminiDefaultsFile))
	hooks := got["hooks"].(map[string]any)
	if len(got) != 1 || len(hooks["SessionStart"].([]any)) != 1 || len(hooks["SessionEnd"].([]any)) != 1 {
		t.Fatalf("defaults = %s", canon(t, got))
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"hooks": `), 0o644)
	l = newTestLaunch(t, "gemini", "gemini")
	l.Env = append(l.Env, geminiDefaultsEnv+"="+bad)
	if err := (geminiAdapter{}).Prepare(l); err == nil {
		t.Fatal("unreadable system defaults must fail the launch rather than be replaced")
	}
}

func TestStripJSONComments(t *testing.T) {
	in := `{"a": "// not a comment", /* c */ "b": "/* nor this */", // tail
"c": "q\"//"}`
	var v map[string]string
	if err := json.Unmarshal(stripJSONComments([]byte(in)), &v); err != nil {
		t.Fatal(err)
	}
	if v["a"] != "// not a comment" || v["b"] != "/* nor this */" || v["c"] != `q"//` {
		t.Fatalf("got %v", v)
	}
}
