// Package modeltest is a fake OpenAI-compatible Chat Completions server for
// tests and benchmarks of the model runtime. It streams scripted replies in
// the exact shapes the OpenAI API uses (a role chunk, content deltas, tool
// calls split across deltas, a finish_reason chunk, the usage chunk with no
// choices when stream_options.include_usage is set, then data: [DONE]), can
// fail in the ways real endpoints do (an error status with a JSON body and
// Retry-After, a malformed chunk, a stream cut midway, a hang), and records
// every request body byte for byte. With nothing scripted it answers
// "model: <last user text>", so a fleet can run many sessions against it.
package modeltest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Server is a fake endpoint. Its URL is the base URL a runtime is
// configured with (it ends in /v1).
type Server struct {
	URL string

	srv  *httptest.Server
	quit chan struct{}
	once sync.Once

	mu       sync.Mutex
	script   []Reply
	def      func(Request) Reply
	requests []Request
	stats    Stats
	changed  chan struct{} // closed and replaced whenever stats change
}

// Request is one request the server received.
type Request struct {
	Path     string
	Header   http.Header
	Body     []byte
	Received time.Time
	// Sent holds when each delta of the reply after the role chunk (each
	// content delta and tool-call fragment, the tokens TokensPerSecond
	// paces) was written and flushed, in order. Finished is when the last
	// chunk (data: [DONE]) was; zero while the stream runs, or when it
	// failed or broke.
	Sent     []time.Time
	Finished time.Time
}

// Stats counts what the server has seen.
type Stats struct {
	Requests int // requests received
	Hanging  int // replies that reached their Hang fault
	Gone     int // hanging replies whose client went away
}

// NewServer starts a server on loopback.
func NewServer() *Server {
	s := &Server{quit: make(chan struct{}), def: Echo, changed: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	return s
}

// Close releases hanging replies and shuts the server down.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.quit)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// Script queues replies: each request takes the next one, and once the
// queue is empty the default behaviour answers.
func (s *Server) Script(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// SetDefault replaces the default behaviour (Echo).
func (s *Server) SetDefault(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.def = f
}

// Requests returns the requests received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]Request(nil), s.requests...)
	for i := range out {
		out[i].Sent = append([]time.Time(nil), out[i].Sent...)
	}
	return out
}

// record notes the time now on the i-th request received.
func (s *Server) record(i int, f func(r *Request, now time.Time)) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.requests[i], now)
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// WaitFor blocks until cond holds for the server's counters or ctx ends.
func (s *Server) WaitFor(ctx context.Context, cond func(Stats) bool) error {
	for {
		s.mu.Lock()
		ok, changed := cond(s.stats), s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// count applies f to the counters and wakes waiters.
func (s *Server) count(f func(*Stats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.stats)
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error","param":null,"code":null}}`, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	req := Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Received: time.Now()}
	s.mu.Lock()
	idx := len(s.requests)
	s.requests = append(s.requests, req)
	var reply Reply
	if len(s.script) > 0 {
		reply, s.script = s.script[0], s.script[1:]
	} else {
		reply = s.def(req)
	}
	s.mu.Unlock()
	s.count(func(st *Stats) { st.Requests++ })

	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(reply.Status)
		_, _ = io.WriteString(w, reply.ErrorBody)
		return
	}
	s.stream(w, r, idx, req, reply)
}

// Model is the model the request names.
func (r Request) Model() string {
	var b struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return b.Model
}

// IncludeUsage reports whether the request asks for the usage chunk.
func (r Request) IncludeUsage() bool {
	var b struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return b.StreamOptions.IncludeUsage
}

// Message is one message of a request, its content flattened to text.
type Message struct {
	Role       string
	Content    string
	ToolCallID string
	ToolCalls  []ToolCall
}

// Messages decodes the request's messages.
func (r Request) Messages() []Message {
	var b struct {
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(r.Body, &b)
	out := make([]Message, 0, len(b.Messages))
	for _, m := range b.Messages {
		msg := Message{Role: m.Role, Content: contentText(m.Content), ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		out = append(out, msg)
	}
	return out
}

// LastUserText is the text of the request's last user message.
func (r Request) LastUserText() string {
	msgs := r.Messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

// contentText flattens a message content: a string, or an array of parts
// whose text parts are joined.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
