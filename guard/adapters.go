package guard

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Provider adapters inject the guard's hooks into a provider's own
// configuration layer for one launch, next to (never instead of) the user's,
// project's and managed hooks: Claude Code through a settings file given
// with --settings, Codex through -c config overrides (its session-flags
// layer) trusting exactly the injected hook, Gemini CLI through a system
// defaults file that copies the machine's and adds the hooks. Any other
// provider name gets no injection: its harness calls `fak
// guard-sessionstart --provider NAME` itself.

// Launch is the child a guard is about to start; an adapter rewrites its
// command line and environment.
type Launch struct {
	Provider string
	// RunDir is the guard's private (0700) run directory; adapters write
	// their configuration files there.
	RunDir string
	// Exe is the absolute path of the fak binary the hooks run.
	Exe string
	// Cwd resolves relative paths given on the command line.
	Cwd  string
	Args []string // argv, the program first
	Env  []string // KEY=VALUE
}

// Adapter injects hooks for one provider.
type Adapter interface {
	Prepare(l *Launch) error
}

// AdapterFor returns the adapter of a known provider, or nil.
func AdapterFor(provider string) Adapter {
	switch provider {
	case "claude":
		return claudeAdapter{}
	case "codex":
		return codexAdapter{}
	case "gemini":
		return geminiAdapter{}
	}
	return nil
}

// ProviderFor infers the provider of a command when --provider is not
// given: the program's base name (claude, codex, gemini, or the harness's
// own name).
func ProviderFor(program string) string {
	return strings.TrimSuffix(filepath.Base(program), ".exe")
}

// HookCommand is the shell command a provider runs for one hook event.
func HookCommand(exe, event, provider string) string {
	return shellQuote(exe) + " " + HookCommandName(event) + " --provider " + shellQuote(provider)
}

// shellQuote quotes s for a POSIX shell (providers run hook commands
// through one).
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./:@%+=,-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// insertArgs puts extra right after the program name.
func insertArgs(args []string, extra ...string) []string {
	out := make([]string, 0, len(args)+len(extra))
	out = append(out, args[0])
	out = append(out, extra...)
	return append(out, args[1:]...)
}

func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// setEnv replaces every KEY= entry with one KEY=value.
func setEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// commandHook is a Claude Code or Gemini CLI style matcher group with one
// command handler and no matcher (every source or reason).
func commandHook(handler map[string]any) map[string]any {
	handler["type"] = "command"
	return map[string]any{"hooks": []any{handler}}
}

// addHookGroup appends group to settings.hooks[event], keeping the groups
// already there.
func addHookGroup(settings map[string]any, event string, group map[string]any) error {
	hooks, ok := settings["hooks"].(map[string]any)
	if !ok {
		if settings["hooks"] != nil {
			return fmt.Errorf("settings field hooks is not an object")
		}
		hooks = map[string]any{}
		settings["hooks"] = hooks
	}
	groups, ok := hooks[event].([]any)
	if !ok && hooks[event] != nil {
		return fmt.Errorf("settings field hooks.%s is not an array", event)
	}
	hooks[event] = append(groups, group)
	return nil
}

// writeJSON writes v as indented JSON, readable only by this user.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}
