package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/fak-dev/fak/fsm"
)

// Hook events carried on the lifecycle socket.
const (
	EventSessionStart = "session_start"
	EventSessionEnd   = "session_end"
)

// knownSources is the SessionStart vocabulary the FSM interprets (DESIGN.md
// §5). Adapters whose harness uses another token normalize it first.
var knownSources = map[string]bool{"startup": true, "resume": true, "clear": true, "compact": true, "fork": true}

// idFields name the provider session id, first found wins: Claude Code,
// Codex and Gemini CLI send session_id; other harnesses may send thread_id
// or conversation_id.
var idFields = []string{"session_id", "thread_id", "conversation_id"}

// Hook is one provider hook delivery, parsed tolerantly.
type Hook struct {
	Event string
	// Source of a SessionStart (startup, resume, clear, compact, fork).
	Source string
	// Reason of a SessionEnd (clear, exit, logout, prompt_input_exit, ...).
	Reason            string
	ProviderSessionID string
	// Metadata is the provider's JSON object, compacted, kept as the
	// event's metadata (trimmed to fsm.MaxMetadataBytes).
	Metadata []byte
}

// ParseHook reads a provider's hook JSON: an object with source (or reason)
// and one of session_id, thread_id, conversation_id. Unknown fields are kept
// in Metadata, never an error; wrong types count as absent.
func ParseHook(event string, raw []byte) (Hook, error) {
	h := Hook{Event: event}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return h, errors.New("malformed hook JSON (want one object)")
	}
	for _, k := range idFields {
		if s := stringField(fields, k); s != "" {
			h.ProviderSessionID = s
			break
		}
	}
	if len(h.ProviderSessionID) > fsm.MaxSessionIDBytes {
		return h, fmt.Errorf("provider session id longer than %d bytes", fsm.MaxSessionIDBytes)
	}
	switch event {
	case EventSessionStart:
		h.Source = strings.ToLower(stringField(fields, "source"))
		switch {
		case h.Source == "":
			return h, errors.New("hook JSON has no source")
		case !knownSources[h.Source]:
			return h, fmt.Errorf("unknown SessionStart source %q (startup, resume, clear, compact, fork)", clip(h.Source, 32))
		case h.ProviderSessionID == "":
			return h, errors.New("hook JSON has none of session_id, thread_id, conversation_id")
		}
	case EventSessionEnd:
		h.Reason = clip(stringField(fields, "reason"), 64)
		if h.Reason == "" {
			h.Reason = "other"
		}
	default:
		return h, fmt.Errorf("unknown hook event %q", clip(event, 32))
	}
	h.Metadata = metadata(raw, fields)
	return h, nil
}

func stringField(fields map[string]json.RawMessage, key string) string {
	var s string
	if json.Unmarshal(fields[key], &s) != nil {
		return ""
	}
	return strings.TrimSpace(s)
}

// metadata compacts the provider's object; one larger than the FSM keeps
// loses its largest fields first (transcripts and the like), never the
// small identifying ones.
func metadata(raw []byte, fields map[string]json.RawMessage) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil && buf.Len() <= fsm.MaxMetadataBytes {
		return buf.Bytes()
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(fields[keys[i]]) > len(fields[keys[j]]) })
	for _, k := range keys {
		delete(fields, k)
		if b, err := json.Marshal(fields); err == nil && len(b) <= fsm.MaxMetadataBytes {
			return b
		}
	}
	return nil
}

// clip shortens s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
