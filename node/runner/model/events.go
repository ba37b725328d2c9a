package model

import "encoding/json"

// The data of the events the runtime journals. tool.call and tool.result
// carry what rebuilding the context needs (Messages); the rest is there
// for people and clients reading the journal.

// callData is a tool.call's data. Arguments is the exact string the model
// produced, which goes back to the model in later requests.
type callData struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	// Step is the model call of the turn that made the call (1-based).
	Step int `json:"step"`
}

// resultData is a tool.result's data; its text is what the model is fed.
type resultData struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	OK      bool   `json:"ok"`
	Refused bool   `json:"refused,omitempty"` // fak would not run it (unknown tool, bad arguments, a path outside the workspace)
	Denied  bool   `json:"denied,omitempty"`  // the approval was answered no
}

// approvalData is an approval.requested's data: which tool call waits
// (its arguments are in the tool.call, and summed up in the text).
type approvalData struct {
	ToolCallID  string `json:"tool_call_id"`
	ToolCallSeq uint64 `json:"tool_call_seq"`
	Name        string `json:"name"`
}

// maxLabel bounds the text of a tool.call or an approval.requested, which
// only people read: the arguments are whole in the tool.call's data, and
// a large write_file would otherwise be journaled twice.
const maxLabel = 1 << 10

// label is s cut to maxLabel bytes, with an ellipsis when cut.
func label(s string) string {
	if len(s) <= maxLabel {
		return s
	}
	return runeHead(s, maxLabel) + "…"
}

// startedData is the part of turn.started's data (written by the runner)
// that names the input the turn serves.
type startedData struct {
	InputSeq uint64 `json:"input_seq"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only fixed struct types of this package are marshalled
	}
	return b
}
