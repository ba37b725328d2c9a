package provider

import (
	"os"
	"path/filepath"
	"strings"
)

// A provider CLI keeps its threads — Claude's project transcripts, Codex's
// rollout files, Gemini's chat files (research notes §1.4, §2.4, §3.4) —
// under a state directory the runtime points it at inside the session's
// workspace, <workspace>/.fak/<kind>, so they move with the workspace and
// the destination of a move resumes the same thread. The CLI logs in
// there too: a fleet runtime authenticates with its account's key or the
// gateway, not a user's login.

// stateVar is the variable each CLI reads its state directory from.
var stateVar = map[string]string{
	ProviderClaude: "CLAUDE_CONFIG_DIR",
	ProviderCodex:  "CODEX_HOME",
	ProviderGemini: "GEMINI_CLI_HOME",
}

// stateDir is the CLI's state directory in the workspace, created.
func (rt *runtime) stateDir() (string, error) {
	dir := filepath.Join(rt.ep.Workspace, ".fak", rt.o.Kind)
	return dir, os.MkdirAll(dir, 0o700)
}

// claudeProjectKey is Claude's name for a project's transcript directory:
// the real path of its cwd with every character outside [a-zA-Z0-9]
// replaced by '-' (notes §1.4). Longer than 200 characters the CLI cuts
// it and adds a hash whose function the notes could not pin down: ok is
// false then.
func claudeProjectKey(cwd string) (key string, ok bool) {
	if real, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = real
	}
	key = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, cwd)
	return key, len(key) <= 200
}

// relocateClaudeThread puts the transcript of thread where Claude looks
// for it from cwd: a workspace restored on another node has another
// absolute path (another data dir), so the transcript carried with it sits
// under the old path's project key. Nothing happens when it is already
// there or cannot be found (the resume then fails and the runtime starts
// a new thread with the journal's conversation).
func relocateClaudeThread(stateDir, cwd, thread string) {
	key, ok := claudeProjectKey(cwd)
	if !ok || thread == "" || strings.ContainsAny(thread, `/\`) {
		return
	}
	projects := filepath.Join(stateDir, "projects")
	want := filepath.Join(projects, key)
	if _, err := os.Lstat(filepath.Join(want, thread+".jsonl")); err == nil {
		return
	}
	found, _ := filepath.Glob(filepath.Join(projects, "*", thread+".jsonl"))
	if len(found) == 0 {
		return
	}
	from := filepath.Dir(found[0])
	if err := os.MkdirAll(want, 0o700); err != nil {
		return
	}
	_ = os.Rename(found[0], filepath.Join(want, thread+".jsonl"))
	// Subagent transcripts live in <project>/<thread>/.
	_ = os.Rename(filepath.Join(from, thread), filepath.Join(want, thread))
}
