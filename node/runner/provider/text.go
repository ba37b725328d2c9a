package provider

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/fak-dev/fak/node/runner"
)

// Bounds on what one event carries: the API refuses an event past 1 MiB
// (text and data together), and a provider's tool input or output (a file
// written or read whole) can be bigger. fak cannot make the CLI send less,
// so it journals a cut copy and says so, rather than failing the turn.
const (
	summaryBytes    = 1 << 10   // the text of tool.call and approval.requested
	toolTextBytes   = 16 << 10  // the text of tool.result
	toolDataBytes   = 256 << 10 // one JSON value (input, content) in data
	maxPromptPrefix = 32 << 10  // the journal's conversation before a new thread's prompt
)

// rawJSON returns v as compact JSON for an event's data: a value past
// toolDataBytes becomes a string holding its start, and cut reports it.
// Absent or null is null.
func rawJSON(v json.RawMessage) (out json.RawMessage, cut bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return json.RawMessage("null"), false
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return marshal(runner.Truncate(string(v), toolDataBytes)), true
	}
	if b.Len() <= toolDataBytes {
		return b.Bytes(), false
	}
	return marshal(runner.Truncate(b.String(), toolDataBytes)), true
}

// jsonString is v's text when v is a JSON string, else v itself (compact
// JSON), "" for absent or null.
func jsonString(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return string(v)
	}
	return b.String()
}

// inputSummary is one line saying what a tool call does, for people
// reading the journal: its command or path when it has one (the fields
// the three CLIs' shell and file tools use), else its input as JSON.
func inputSummary(input json.RawMessage) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(input, &fields) == nil {
		for _, k := range []string{"command", "cmd", "file_path", "absolute_path", "path", "url", "pattern", "query"} {
			if s := jsonString(fields[k]); s != "" {
				return oneLine(s)
			}
		}
	}
	return oneLine(jsonString(input))
}

// oneLine folds s's line breaks into spaces, bounded for a summary.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(runner.Truncate(s, 4*summaryBytes)), " ")
	return runner.Truncate(s, summaryBytes)
}
