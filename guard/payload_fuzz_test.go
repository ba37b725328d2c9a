package guard

import (
	"encoding/json"
	"testing"

	"github.com/fak-dev/fak/fsm"
)

// FuzzParseHook: whatever a provider (or anyone on the machine) pipes to
// a hook, ParseHook never panics, and what it accepts is what the FSM
// accepts: a session id within its limit, metadata that is one JSON object
// within the metadata limit, and a SessionStart with a known source and
// an id.
func FuzzParseHook(f *testing.F) {
	for _, s := range []string{
		`{"session_id":"abc","source":"startup","cwd":"/x","transcript_path":"/t.jsonl"}`,
		`{"thread_id":"t1","source":"resume"}`,
		`{"conversation_id":"c1","reason":"logout"}`,
		`{"session_id":1,"source":["clear"]}`,
		`[]`, `null`, `{}`, `{"session_id":"` + string(make([]byte, 300)) + `"}`,
	} {
		f.Add(EventSessionStart, []byte(s))
		f.Add(EventSessionEnd, []byte(s))
	}
	f.Fuzz(func(t *testing.T, event string, raw []byte) {
		h, err := ParseHook(event, raw)
		if err != nil {
			return
		}
		if len(h.ProviderSessionID) > fsm.MaxSessionIDBytes {
			t.Fatalf("accepted a session id of %d bytes", len(h.ProviderSessionID))
		}
		if len(h.Metadata) > fsm.MaxMetadataBytes {
			t.Fatalf("metadata of %d bytes", len(h.Metadata))
		}
		if h.Metadata != nil {
			var obj map[string]json.RawMessage
			if json.Unmarshal(h.Metadata, &obj) != nil || obj == nil {
				t.Fatalf("metadata is not one JSON object: %q", h.Metadata)
			}
		}
		if event == EventSessionStart && (!knownSources[h.Source] || h.ProviderSessionID == "") {
			t.Fatalf("accepted SessionStart with source %q, id %q", h.Source, h.ProviderSessionID)
		}
	})
}
