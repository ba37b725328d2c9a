package guard

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/fak-dev/fak/internal/tomlquote"
)

// Codex (codex-rs; written against codex-cli 0.147 and 0.148): hooks come
// from hooks.json files and inline [hooks] tables of every active config
// layer, and `-c key=value` overrides (value parsed as TOML, key a dotted
// path) form one more layer, the session-flags layer, whose hooks run next
// to the user's, project's, managed and plugin hooks. So the guard adds
//
//	-c hooks.SessionStart=[{hooks=[{type="command",command="…",timeout=5}]}]
//
// SessionStart carries source startup|resume|clear|compact (no fork; /new
// arrives as startup with a new session_id) and fires at the start of the
// next turn. Codex has no SessionEnd hook.
//
// A non-managed hook runs only once trusted: [hooks.state."KEY"] holds a
// trusted_hash per hook, read from the user and session-flags layers. KEY
// is "<source>:<event label>:<group>:<handler>", the source of the
// session-flags layer being the synthetic path /<session-flags>/config.toml;
// the hash is "sha256:" + hex(sha256(JSON)) of the normalized hook identity
// {event_name, matcher?, hooks:[{type, command, timeout, async,
// statusMessage?}]} with sorted keys, compact, absent fields omitted. The
// guard trusts exactly its own handler this way:
//
//	-c hooks.state={"/<session-flags>/config.toml:session_start:0:0"={enabled=true,trusted_hash="sha256:…"}}
//
// (the key holds dots, so it is set as an inline table under hooks.state,
// not as a dotted path). It never passes --dangerously-bypass-hook-trust,
// which would trust every hook. A changed command changes the hash, so a
// tampered hook does not run.

const (
	codexTimeoutSec = 5
	// codexSessionFlagsSource is the key source of the -c layer's hooks.
	codexSessionFlagsSource = "/<session-flags>/config.toml"
)

type codexAdapter struct{}

func (codexAdapter) Prepare(l *Launch) error {
	l.Args = insertArgs(l.Args, CodexFlags(HookCommand(l.Exe, EventSessionStart, "codex"))...)
	return nil
}

// CodexFlags are the -c overrides that add command as Codex's SessionStart
// hook and trust exactly it.
func CodexFlags(command string) []string {
	hook := fmt.Sprintf("hooks.SessionStart=[{hooks=[{type=%s,command=%s,timeout=%d}]}]",
		tomlquote.String("command"), tomlquote.String(command), codexTimeoutSec)
	key := codexSessionFlagsSource + ":session_start:0:0"
	state := fmt.Sprintf("hooks.state={%s={enabled=true,trusted_hash=%s}}",
		tomlquote.String(key), tomlquote.String(CodexHookHash(command, codexTimeoutSec)))
	return []string{"-c", hook, "-c", state}
}

// CodexHookHash is Codex's trust hash of a SessionStart command hook with
// no matcher, not async, no status message.
func CodexHookHash(command string, timeoutSec int) string {
	identity := map[string]any{
		"event_name": "session_start",
		"hooks": []any{map[string]any{
			"type": "command", "command": command, "timeout": timeoutSec, "async": false,
		}},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // serde_json escapes only quotes, backslashes and controls
	if err := enc.Encode(identity); err != nil {
		panic("guard: encode hook identity: " + err.Error())
	}
	sum := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return "sha256:" + hex.EncodeToString(sum[:])
}
