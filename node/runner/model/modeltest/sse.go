package modeltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

var completionIDs atomic.Uint64

// chunk is one chat.completion.chunk, its fields in the order the OpenAI
// API sends them.
type chunk struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"`
	Created           int64    `json:"created"`
	Model             string   `json:"model"`
	SystemFingerprint string   `json:"system_fingerprint"`
	Choices           []choice `json:"choices"`
	Usage             *usage   `json:"usage,omitempty"`
}

type choice struct {
	Index        int             `json:"index"`
	Delta        json.RawMessage `json:"delta"`
	Logprobs     *struct{}       `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type usage struct {
	PromptTokens            int64 `json:"prompt_tokens"`
	CompletionTokens        int64 `json:"completion_tokens"`
	TotalTokens             int64 `json:"total_tokens"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// Deltas, shaped like the OpenAI API's: the role chunk opens the message
// (carrying the first tool call when there is no text), tool calls are
// keyed by index and only their first fragment has id, type and name.
func roleDelta() json.RawMessage {
	return json.RawMessage(`{"role":"assistant","content":"","refusal":null}`)
}

func roleToolDelta(index int, c ToolCall) json.RawMessage {
	return json.RawMessage(`{"role":"assistant","content":null,"tool_calls":[` + toolHeader(index, c) + `],"refusal":null}`)
}

func contentDelta(text string) json.RawMessage {
	return json.RawMessage(`{"content":` + quote(text) + `}`)
}

func toolHeaderDelta(index int, c ToolCall) json.RawMessage {
	return json.RawMessage(`{"tool_calls":[` + toolHeader(index, c) + `]}`)
}

func toolHeader(index int, c ToolCall) string {
	return `{"index":` + strconv.Itoa(index) + `,"id":` + quote(c.ID) + `,"type":"function","function":{"name":` + quote(c.Name) + `,"arguments":""}}`
}

func toolArgsDelta(index int, fragment string) json.RawMessage {
	return json.RawMessage(`{"tool_calls":[{"index":` + strconv.Itoa(index) + `,"function":{"arguments":` + quote(fragment) + `}}]}`)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// streamer writes one reply's events.
type streamer struct {
	s     *Server
	w     http.ResponseWriter
	r     *http.Request
	base  chunk
	rate  float64
	start time.Time
}

func (st *streamer) send(c chunk) {
	b, _ := json.Marshal(c)
	fmt.Fprintf(st.w, "data: %s\n\n", b)
	st.flush()
}

func (st *streamer) flush() {
	if f, ok := st.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (st *streamer) delta(d json.RawMessage, finish *string) {
	c := st.base
	c.Choices = []choice{{Index: 0, Delta: d, FinishReason: finish}}
	st.send(c)
}

// pace waits until token n (1-based) is due; false when the client left
// or the server is closing.
func (st *streamer) pace(n int) bool {
	if st.rate <= 0 {
		return true
	}
	due := st.start.Add(time.Duration(float64(n) / st.rate * float64(time.Second)))
	t := time.NewTimer(time.Until(due))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-st.r.Context().Done():
		return false
	case <-st.s.quit:
		return false
	}
}

// fault breaks the stream the way f says.
func (st *streamer) fault(f Fault) {
	switch f {
	case Malformed:
		fmt.Fprintf(st.w, "data: {\"id\":%s,\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"unterminated\n\n", quote(st.base.ID))
		st.flush()
	case Cut:
		st.flush()
		// Aborting the handler drops the connection without the final
		// chunk of the chunked encoding: the client sees the body end
		// early, as when a proxy or the upstream dies mid-stream.
		panic(http.ErrAbortHandler)
	case End:
		st.flush()
	case Hang:
		st.flush()
		st.s.count(func(s *Stats) { s.Hanging++ })
		select {
		case <-st.r.Context().Done():
			st.s.count(func(s *Stats) { s.Gone++ })
		case <-st.s.quit:
		}
	}
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, idx int, req Request, reply Reply) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	st := &streamer{s: s, w: w, r: r, rate: reply.TokensPerSecond, start: time.Now(), base: chunk{
		ID:                "chatcmpl-modeltest" + strconv.FormatUint(completionIDs.Add(1), 10),
		Object:            "chat.completion.chunk",
		Created:           time.Now().Unix(),
		Model:             req.Model(),
		SystemFingerprint: "fp_modeltest",
	}}

	var deltas []json.RawMessage
	pieces := splitWords(reply.Text)
	if reply.Deltas > 0 {
		pieces = splitRunes(reply.Text, reply.Deltas)
	}
	for _, p := range pieces {
		deltas = append(deltas, contentDelta(p))
	}
	first := roleDelta()
	for i, c := range reply.ToolCalls {
		if i == 0 && reply.Text == "" {
			first = roleToolDelta(0, c)
		} else {
			deltas = append(deltas, toolHeaderDelta(i, c))
		}
		split := c.Split
		if split == 0 {
			split = 3
		}
		for _, frag := range splitRunes(c.Arguments, split) {
			if frag != "" {
				deltas = append(deltas, toolArgsDelta(i, frag))
			}
		}
	}

	st.delta(first, nil)
	for i, d := range deltas {
		if reply.Fault != NoFault && i == reply.FaultAfter {
			st.fault(reply.Fault)
			return
		}
		if !st.pace(i + 1) {
			return
		}
		st.delta(d, nil)
		s.record(idx, func(r *Request, now time.Time) { r.Sent = append(r.Sent, now) })
	}
	if reply.Fault != NoFault {
		st.fault(reply.Fault)
		return
	}
	finish := reply.FinishReason
	if finish == "" {
		finish = "stop"
		if len(reply.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	st.delta(json.RawMessage(`{}`), &finish)
	if req.IncludeUsage() {
		u := reply.Usage
		if u == nil {
			u = countUsage(req, reply)
		}
		c := st.base
		c.Choices = []choice{}
		c.Usage = &usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
		st.send(c)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	st.flush()
	s.record(idx, func(r *Request, now time.Time) { r.Finished = now })
}

// countUsage counts words: those of the request's messages as the prompt,
// the reply's text and tool calls as the completion.
func countUsage(req Request, reply Reply) *Usage {
	u := &Usage{CompletionTokens: words(reply.Text)}
	for _, m := range req.Messages() {
		u.PromptTokens += words(m.Content)
		for _, c := range m.ToolCalls {
			u.PromptTokens += 1 + words(c.Arguments)
		}
	}
	for _, c := range reply.ToolCalls {
		u.CompletionTokens += 1 + words(c.Arguments)
	}
	return u
}
