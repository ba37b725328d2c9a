package guard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// Gemini CLI (written against upstream gemini-cli of 2026-08-25, commit
// 64b5b79: settingsSchema.ts, docs/hooks, clearCommand.ts):
// settings.json files in four scopes (system defaults, user, project,
// system overrides) are merged, and the hooks.<Event> arrays are
// concatenated across scopes (merge strategy CONCAT), so hooks from every
// scope run. The guard copies the system defaults file (the lowest scope,
// $GEMINI_CLI_SYSTEM_DEFAULTS_PATH or the platform's
// /etc/gemini-cli/system-defaults.json), adds
//
//	{"hooks":{"SessionStart":[{"hooks":[{"type":"command","name":"fak-guard-sessionstart","command":"…","timeout":5000}]}],
//	          "SessionEnd":[…"fak-guard-sessionend"…]}}
//
// and points GEMINI_CLI_SYSTEM_DEFAULTS_PATH at the copy for the child, so
// the machine's defaults, the user's, the project's and the system
// overrides all still apply. timeout is in milliseconds. SessionStart
// carries source startup|resume|clear; SessionEnd reason
// exit|clear|logout|prompt_input_exit|other. /clear (and its alias /new)
// fires SessionEnd(clear) with the old session_id, then SessionStart(clear)
// with a new one: the cluster makes that one boundary.

const (
	geminiTimeoutMs       = 5000
	geminiDefaultsEnv     = "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"
	geminiDefaultsFile    = "gemini-system-defaults.json"
	geminiStartHookName   = "fak-guard-sessionstart"
	geminiEndHookName     = "fak-guard-sessionend"
	geminiLinuxDefaults   = "/etc/gemini-cli/system-defaults.json"
	geminiDarwinDefaults  = "/Library/Application Support/GeminiCli/system-defaults.json"
	geminiWindowsDefaults = `C:\ProgramData\gemini-cli\system-defaults.json`
)

type geminiAdapter struct{}

func (geminiAdapter) Prepare(l *Launch) error {
	base, ok := lookupEnv(l.Env, geminiDefaultsEnv)
	if !ok || base == "" {
		base = geminiSystemDefaultsPath()
	}
	settings, err := loadGeminiSettings(base)
	if err != nil {
		return fmt.Errorf("gemini system defaults %s: %w", base, err)
	}
	if err := addHookGroup(settings, "SessionStart", commandHook(map[string]any{
		"name": geminiStartHookName, "command": HookCommand(l.Exe, EventSessionStart, "gemini"), "timeout": geminiTimeoutMs,
	})); err != nil {
		return err
	}
	if err := addHookGroup(settings, "SessionEnd", commandHook(map[string]any{
		"name": geminiEndHookName, "command": HookCommand(l.Exe, EventSessionEnd, "gemini"), "timeout": geminiTimeoutMs,
	})); err != nil {
		return err
	}
	path := filepath.Join(l.RunDir, geminiDefaultsFile)
	if err := writeJSON(path, settings); err != nil {
		return err
	}
	l.Env = setEnv(l.Env, geminiDefaultsEnv, path)
	return nil
}

func geminiSystemDefaultsPath() string {
	switch runtime.GOOS {
	case "darwin":
		return geminiDarwinDefaults
	case "windows":
		return geminiWindowsDefaults
	}
	return geminiLinuxDefaults
}

// loadGeminiSettings reads a settings file as Gemini CLI does (JSON with
// comments); a missing file is empty settings.
func loadGeminiSettings(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, err
	}
	var settings map[string]any
	if err := json.Unmarshal(stripJSONComments(data), &settings); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if settings == nil {
		settings = map[string]any{}
	}
	return settings, nil
}

// stripJSONComments blanks // and /* */ comments outside strings (keeping
// the offsets of everything else, for error messages).
func stripJSONComments(in []byte) []byte {
	out := make([]byte, len(in))
	copy(out, in)
	inString, escaped := false, false
	for i := 0; i < len(out); i++ {
		c := out[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			out[i], out[i+1] = ' ', ' '
			for i += 2; i < len(out) && !(out[i] == '*' && i+1 < len(out) && out[i+1] == '/'); i++ {
				if out[i] != '\n' {
					out[i] = ' '
				}
			}
			if i+1 < len(out) {
				out[i], out[i+1] = ' ', ' '
				i++
			}
		}
	}
	return out
}
