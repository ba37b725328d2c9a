package guard

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fak-dev/fak/fsm"
)

// What each provider really sends (shared/research/provider-hooks-and-session-journals.md).
const (
	claudeStartup = `{"session_id":"abc123","transcript_path":"/home/u/.claude/projects/p/abc123.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"startup","model":"claude-sonnet-5","permission_mode":"default"}`
	claudeClear   = `{"session_id":"def456","transcript_path":"/home/u/.claude/projects/p/def456.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"clear","session_title":"refactor"}`
	claudeEnd     = `{"session_id":"abc123","transcript_path":"/home/u/.claude/projects/p/abc123.jsonl","cwd":"/w","hook_event_name":"SessionEnd","reason":"clear"}`
	codexStartup  = `{"session_id":"0199a7b1-5c3e-7d10-9f2a-0123456789ab","transcript_path":null,"cwd":"/w","hook_event_name":"SessionStart","model":"gpt-5.5-codex","permission_mode":"default","source":"startup"}`
	geminiClear   = `{"session_id":"6f1c2d3e-aaaa-4bbb-8ccc-0123456789ab","transcript_path":"","cwd":"/w","hook_event_name":"SessionStart","timestamp":"2026-08-21T10:00:00.000Z","source":"clear"}`
	geminiEnd     = `{"session_id":"11111111-aaaa-4bbb-8ccc-0123456789ab","transcript_path":"/home/u/.gemini/tmp/chat.json","cwd":"/w","hook_event_name":"SessionEnd","timestamp":"2026-08-21T10:00:00.000Z","reason":"clear"}`
)

func TestParseHookProviderShapes(t *testing.T) {
	for _, tc := range []struct {
		name, event, raw       string
		source, reason, idWant string
	}{
		{"claude startup", EventSessionStart, claudeStartup, "startup", "", "abc123"},
		{"claude clear", EventSessionStart, claudeClear, "clear", "", "def456"},
		{"claude end", EventSessionEnd, claudeEnd, "", "clear", "abc123"},
		{"codex startup, transcript_path null", EventSessionStart, codexStartup, "startup", "", "0199a7b1-5c3e-7d10-9f2a-0123456789ab"},
		{"gemini clear", EventSessionStart, geminiClear, "clear", "", "6f1c2d3e-aaaa-4bbb-8ccc-0123456789ab"},
		{"gemini end", EventSessionEnd, geminiEnd, "", "clear", "11111111-aaaa-4bbb-8ccc-0123456789ab"},
		{"generic thread_id", EventSessionStart, `{"source":"clear","thread_id":"T2"}`, "clear", "", "T2"},
		{"generic conversation_id", EventSessionStart, `{"source":"resume","conversation_id":"C1","extra":[1,2]}`, "resume", "", "C1"},
		{"session_id wins", EventSessionStart, `{"source":"fork","thread_id":"T","session_id":"S"}`, "fork", "", "S"},
		{"source case and space", EventSessionStart, `{"source":" Compact ","session_id":"S"}`, "compact", "", "S"},
		{"end without reason or id", EventSessionEnd, `{"hook_event_name":"SessionEnd"}`, "", "other", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseHook(tc.event, []byte(tc.raw))
			if err != nil {
				t.Fatalf("ParseHook: %v", err)
			}
			if h.Source != tc.source || h.Reason != tc.reason || h.ProviderSessionID != tc.idWant {
				t.Fatalf("got source %q reason %q id %q, want %q %q %q", h.Source, h.Reason, h.ProviderSessionID, tc.source, tc.reason, tc.idWant)
			}
			// Every field the provider sent is kept, unknown ones included.
			var want, got map[string]any
			json.Unmarshal([]byte(tc.raw), &want)
			if err := json.Unmarshal(h.Metadata, &got); err != nil {
				t.Fatalf("metadata %q: %v", h.Metadata, err)
			}
			if len(got) != len(want) {
				t.Fatalf("metadata has %d fields, want %d: %s", len(got), len(want), h.Metadata)
			}
			for k := range want {
				if _, ok := got[k]; !ok {
					t.Errorf("metadata lost %q", k)
				}
			}
		})
	}
}

func TestParseHookRejects(t *testing.T) {
	for _, tc := range []struct{ name, event, raw, want string }{
		{"not JSON", EventSessionStart, `source=clear`, "malformed"},
		{"array", EventSessionStart, `[{"source":"clear"}]`, "malformed"},
		{"null", EventSessionStart, `null`, "malformed"},
		{"empty", EventSessionStart, ``, "malformed"},
		{"no source", EventSessionStart, `{"session_id":"S"}`, "no source"},
		{"unknown source", EventSessionStart, `{"session_id":"S","source":"reboot"}`, "unknown SessionStart source"},
		{"no id", EventSessionStart, `{"source":"clear"}`, "none of session_id"},
		{"id of the wrong type", EventSessionStart, `{"source":"clear","session_id":42}`, "none of session_id"},
		{"id too long", EventSessionStart, `{"source":"clear","session_id":"` + strings.Repeat("x", fsm.MaxSessionIDBytes+1) + `"}`, "longer than"},
		{"unknown event", "session_middle", `{"source":"clear","session_id":"S"}`, "unknown hook event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHook(tc.event, []byte(tc.raw))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParseHookTrimsOversizedMetadata(t *testing.T) {
	raw, _ := json.Marshal(map[string]any{
		"session_id": "S", "source": "compact", "cwd": "/w",
		"summary": strings.Repeat("y", fsm.MaxMetadataBytes),
	})
	h, err := ParseHook(EventSessionStart, raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Metadata) > fsm.MaxMetadataBytes {
		t.Fatalf("metadata is %d bytes, over %d", len(h.Metadata), fsm.MaxMetadataBytes)
	}
	var got map[string]any
	json.Unmarshal(h.Metadata, &got)
	if _, ok := got["summary"]; ok || got["session_id"] != "S" || got["cwd"] != "/w" {
		t.Fatalf("trimmed metadata = %v, want the small fields without summary", got)
	}
}

func TestClipKeepsUTF8(t *testing.T) {
	s := "ab" + "é" + "c" // é is 2 bytes at offsets 2-3
	if got := clip(s, 3); got != "ab" {
		t.Fatalf("clip = %q, want %q", got, "ab")
	}
	if got := clip(s, 10); got != s {
		t.Fatalf("clip = %q", got)
	}
}
