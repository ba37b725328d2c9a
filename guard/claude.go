package guard

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Claude Code (written against the hooks reference of 2026-08-22, Claude
// Code 2.1.234 and later: source fork since 2.1.214):
// hooks live in settings JSON, event → matcher groups → handlers:
//
//	{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"…","timeout":5}]}]}}
//
// `claude --settings FILE` adds a settings layer; hooks from every layer
// (user, project, local, managed, plugins, this one) merge and all matching
// handlers run, so the guard's hooks sit next to the others. SessionStart
// (source startup|resume|clear|compact|fork) and SessionEnd (reason
// clear|resume|logout|prompt_input_exit|other) get a command hook with no
// matcher. timeout is in seconds; the SessionEnd one stays small because
// the largest SessionEnd timeout in settings raises Claude's shared
// SessionEnd budget (1.5 s by default).
//
// A --settings the user passed (a file or a JSON string) is merged into the
// guard's file rather than replaced: Claude Code reads one --settings.

const (
	claudeStartTimeoutSec = 5
	claudeEndTimeoutSec   = 3
	claudeSettingsFile    = "claude-settings.json"
)

type claudeAdapter struct{}

func (claudeAdapter) Prepare(l *Launch) error {
	settings := map[string]any{}
	args := l.Args
	if i, n, value, ok := findFlagValue(args, "--settings"); ok {
		user, err := loadClaudeSettings(value, l.Cwd)
		if err != nil {
			return fmt.Errorf("claude --settings %s: %w", clip(value, 80), err)
		}
		settings = user
		args = append(append([]string{}, args[:i]...), args[i+n:]...)
	}
	if err := addHookGroup(settings, "SessionStart", commandHook(map[string]any{
		"command": HookCommand(l.Exe, EventSessionStart, "claude"), "timeout": claudeStartTimeoutSec,
	})); err != nil {
		return err
	}
	if err := addHookGroup(settings, "SessionEnd", commandHook(map[string]any{
		"command": HookCommand(l.Exe, EventSessionEnd, "claude"), "timeout": claudeEndTimeoutSec,
	})); err != nil {
		return err
	}
	path := filepath.Join(l.RunDir, claudeSettingsFile)
	if err := writeJSON(path, settings); err != nil {
		return err
	}
	l.Args = insertArgs(args, "--settings", path)
	return nil
}

// loadClaudeSettings reads a --settings value: a JSON object string, or the
// path of a JSON file (relative to cwd).
func loadClaudeSettings(value, cwd string) (map[string]any, error) {
	data := []byte(value)
	if !strings.HasPrefix(strings.TrimSpace(value), "{") {
		path := value
		if !filepath.IsAbs(path) {
			path = filepath.Join(cwd, path)
		}
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, err
		}
	}
	var settings map[string]any
	if err := json.Unmarshal(data, &settings); err != nil || settings == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	return settings, nil
}

// findFlagValue finds "--flag VALUE" or "--flag=VALUE" among the arguments
// after the program (up to a "--"): its index, how many arguments it spans
// and its value.
func findFlagValue(args []string, flag string) (i, n int, value string, ok bool) {
	for i = 1; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			return 0, 0, "", false
		case a == flag && i+1 < len(args):
			return i, 2, args[i+1], true
		case strings.HasPrefix(a, flag+"="):
			return i, 1, strings.TrimPrefix(a, flag+"="), true
		}
	}
	return 0, 0, "", false
}
