// Package gatewaytest is a fake model provider for gateway tests and
// benchmarks: one HTTP server answering Anthropic Messages, OpenAI Chat
// Completions and Responses, and Gemini generateContent, streamed (in the
// exact SSE shapes of the research notes §4, §5) or not. Every answer
// reports usage drawn from the request's own seed, and the server keeps
// the totals it reported, so a test compares them with what was charged.
package gatewaytest

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Totals is what the upstream reported over every answered call.
type Totals struct {
	Calls, PromptTokens, OutputTokens uint64
}

// Upstream is the fake provider.
type Upstream struct {
	*httptest.Server
	// Chunks is how many content chunks a streamed answer has (default 8);
	// ChunkDelay the pause before each (default none).
	Chunks     int
	ChunkDelay time.Duration

	requests     atomic.Int64
	mu           sync.Mutex
	totals       Totals
	beforeAnswer func()
}

// BeforeAnswer sets f to run as each request arrives, before the upstream
// answers it (a test changes the fleet mid-call); nil: nothing.
func (u *Upstream) BeforeAnswer(f func()) {
	u.mu.Lock()
	u.beforeAnswer = f
	u.mu.Unlock()
}

// New starts a fake upstream.
func New() *Upstream {
	u := &Upstream{Chunks: 8}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	return u
}

// Requests is how many requests reached the upstream.
func (u *Upstream) Requests() int64 { return u.requests.Load() }

// Totals is what the upstream reported so far.
func (u *Upstream) Totals() Totals {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.totals
}

// usageOf draws a call's usage from its body: the same body, the same
// usage; prompt includes cached, which is at most half of it.
func usageOf(body []byte) (prompt, cached, output uint64) {
	h := fnv.New64a()
	h.Write(body)
	x := h.Sum64()
	prompt = 10 + x%5000
	cached = (x >> 16) % (prompt/2 + 1)
	output = 1 + (x>>32)%800
	return
}

func (u *Upstream) count(prompt, output uint64) {
	u.mu.Lock()
	u.totals.Calls++
	u.totals.PromptTokens += prompt
	u.totals.OutputTokens += output
	u.mu.Unlock()
}

type request struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.requests.Add(1)
	u.mu.Lock()
	before := u.beforeAnswer
	u.mu.Unlock()
	if before != nil {
		before()
	}
	body, _ := io.ReadAll(r.Body)
	var req request
	_ = json.Unmarshal(body, &req)
	prompt, cached, output := usageOf(body)
	switch {
	case r.URL.Path == "/v1/messages":
		u.anthropic(w, req, prompt, cached, output)
	case r.URL.Path == "/v1/chat/completions":
		u.chat(w, req, prompt, cached, output)
	case r.URL.Path == "/v1/responses":
		u.responses(w, req, prompt, cached, output)
	case strings.HasSuffix(r.URL.Path, ":streamGenerateContent"):
		u.gemini(w, r.URL.Query().Get("alt") == "sse", true, prompt, cached, output)
	case strings.HasSuffix(r.URL.Path, ":generateContent"):
		u.gemini(w, false, false, prompt, cached, output)
	default:
		http.Error(w, `{"error":{"message":"no such route"}}`, http.StatusNotFound)
	}
}

// stream writes SSE events, flushing each, with the configured pauses.
type stream struct {
	w http.ResponseWriter
	u *Upstream
}

func (u *Upstream) sse(w http.ResponseWriter) stream {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return stream{w, u}
}

func (s stream) event(name, data string) {
	if s.u.ChunkDelay > 0 {
		time.Sleep(s.u.ChunkDelay)
	}
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	s.w.(http.Flusher).Flush()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (u *Upstream) anthropic(w http.ResponseWriter, req request, prompt, cached, output uint64) {
	input := prompt - cached
	if !req.Stream {
		writeJSON(w, map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": req.Model,
			"content": []any{map[string]any{"type": "text", "text": "ok"}}, "stop_reason": "end_turn",
			"usage": map[string]any{"input_tokens": input, "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached, "output_tokens": output}})
		u.count(prompt, output)
		return
	}
	s := u.sse(w)
	s.event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":%d,"output_tokens":1,"service_tier":"standard"}}}`, req.Model, input, cached))
	s.event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	s.event("ping", `{"type": "ping"}`)
	for i := 0; i < u.Chunks; i++ {
		s.event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word "}}`)
	}
	s.event("content_block_stop", `{"type":"content_block_stop","index":0}`)
	s.event("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":%d}}`, output))
	s.event("message_stop", `{"type":"message_stop"}`)
	u.count(prompt, output)
}

func (u *Upstream) chat(w http.ResponseWriter, req request, prompt, cached, output uint64) {
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d},"completion_tokens_details":{"reasoning_tokens":0}}`,
		prompt, output, prompt+output, cached)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1727346176,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":%s}`+"\n", req.Model, usage)
		u.count(prompt, output)
		return
	}
	s := u.sse(w)
	head := fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1727346176,"model":%q,"system_fingerprint":"fp_1",`, req.Model)
	s.event("", head+`"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}`)
	for i := 0; i < u.Chunks; i++ {
		s.event("", head+`"choices":[{"index":0,"delta":{"content":"word "},"logprobs":null,"finish_reason":null}]}`)
	}
	s.event("", head+`"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`)
	if req.StreamOptions.IncludeUsage {
		s.event("", head+`"choices":[],"usage":`+usage+`}`)
		u.count(prompt, output)
	}
	s.event("", "[DONE]")
}

func (u *Upstream) responses(w http.ResponseWriter, req request, prompt, cached, output uint64) {
	usage := fmt.Sprintf(`{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}`,
		prompt, cached, output, prompt+output)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"resp_1","object":"response","model":%q,"status":"completed","output":[],"usage":%s}`+"\n", req.Model, usage)
		u.count(prompt, output)
		return
	}
	s := u.sse(w)
	s.event("response.created", fmt.Sprintf(`{"type":"response.created","response":{"id":"resp_1","model":%q,"status":"in_progress"}}`, req.Model))
	for i := 0; i < u.Chunks; i++ {
		s.event("response.output_text.delta", `{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"word "}`)
	}
	s.event("response.completed", fmt.Sprintf(`{"type":"response.completed","response":{"id":"resp_1","model":%q,"status":"completed","output":[],"usage":%s}}`, req.Model, usage))
	u.count(prompt, output)
}

func (u *Upstream) gemini(w http.ResponseWriter, sse, streamed bool, prompt, cached, output uint64) {
	chunk := func(text string, out uint64, final bool) string {
		finish := ""
		if final {
			finish = `,"finishReason":"STOP"`
		}
		return fmt.Sprintf(`{"candidates":[{"content":{"parts":[{"text":%q}],"role":"model"},"index":0%s}],"usageMetadata":{"promptTokenCount":%d,"candidatesTokenCount":%d,"cachedContentTokenCount":%d,"totalTokenCount":%d},"modelVersion":"gemini-2.5-pro"}`,
			text, finish, prompt, out, cached, prompt+out)
	}
	switch {
	case !streamed:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, chunk("ok", output, true))
	case sse:
		s := u.sse(w)
		for i := 0; i < u.Chunks; i++ {
			s.event("", chunk("word ", uint64(i)*output/uint64(u.Chunks+1), false))
		}
		s.event("", chunk("", output, true))
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "[%s,\n%s]\n", chunk("word ", 0, false), chunk("", output, true))
	}
	u.count(prompt, output)
}
