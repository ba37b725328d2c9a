package modeltest

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Reply scripts the server's answer to one request: a streamed assistant
// message (text, tool calls, usage) or a failure.
type Reply struct {
	// Text is the assistant's text, streamed as content deltas.
	Text string
	// Deltas is how many content deltas Text is split into (cut between
	// runes); 0 streams one delta per word.
	Deltas int
	// ToolCalls are streamed after the text, each split across deltas.
	ToolCalls []ToolCall
	// FinishReason defaults to "tool_calls" when there are tool calls,
	// else "stop".
	FinishReason string
	// Usage is reported in the final usage chunk when the request asks
	// for it (stream_options.include_usage). nil: counted from the
	// request's messages and the reply (words).
	Usage *Usage
	// TokensPerSecond paces the stream: each content or argument delta
	// counts as one token. 0 streams as fast as the connection takes it.
	TokensPerSecond float64

	// Status, when not 0 or 200, answers with that status and ErrorBody
	// (see ErrorReply) instead of a stream.
	Status    int
	ErrorBody string
	// Header is added to the response (e.g. Retry-After).
	Header http.Header

	// Fault breaks the stream after FaultAfter deltas (the role chunk
	// does not count).
	Fault      Fault
	FaultAfter int
}

// ToolCall is one function call the model makes.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
	// Split is how many argument fragments Arguments is streamed in
	// (cut between runes); 0 means 3.
	Split int
}

// Usage is what the usage chunk reports.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
}

// Fault is a way for a stream to break.
type Fault int

const (
	// NoFault streams the whole reply, the usage chunk and [DONE].
	NoFault Fault = iota
	// Malformed sends a chunk that is not JSON, then ends the stream.
	Malformed
	// Cut drops the connection: no finish_reason, no usage, no [DONE].
	Cut
	// Hang stops sending and keeps the stream open until the client
	// leaves or the server closes.
	Hang
	// End ends the response cleanly: no finish_reason, no usage, no
	// [DONE] (a proxy that closed the stream early).
	End
)

// ErrorReply answers with status and an OpenAI-style error body; header
// pairs ("Retry-After", "2") are added to the response.
func ErrorReply(status int, message string, header ...string) Reply {
	typ := map[int]string{
		http.StatusUnauthorized:    "invalid_request_error",
		http.StatusForbidden:       "invalid_request_error",
		http.StatusNotFound:        "invalid_request_error",
		http.StatusTooManyRequests: "rate_limit_exceeded",
	}[status]
	if typ == "" {
		typ = "server_error"
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": typ, "param": nil, "code": nil,
	}})
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Add(header[i], header[i+1])
	}
	return Reply{Status: status, ErrorBody: string(body), Header: h}
}

// EchoPrefix starts the default reply: "model: <last user text>".
const EchoPrefix = "model: "

// Echo is the default behaviour when no reply is scripted: it answers
// "model: <the last user message's text>".
func Echo(r Request) Reply {
	return Reply{Text: EchoPrefix + r.LastUserText()}
}

// splitRunes cuts s into n pieces of nearly equal rune counts (fewer when
// s is shorter), which concatenated give s back.
func splitRunes(s string, n int) []string {
	runes := []rune(s)
	if n <= 1 || len(runes) <= 1 {
		return []string{s}
	}
	n = min(n, len(runes))
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, string(runes[i*len(runes)/n:(i+1)*len(runes)/n]))
	}
	return out
}

// splitWords cuts s after each space, keeping the spaces.
func splitWords(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, w := range strings.SplitAfter(s, " ") {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

func words(s string) int64 { return int64(len(strings.Fields(s))) }
