package modeltest

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, s *Server, body string) (*http.Response, string) {
	t.Helper()
	res, err := http.Post(s.URL+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

var volatile = regexp.MustCompile(`"id":"chatcmpl-modeltest\d+","object":"chat.completion.chunk","created":\d+`)

// The stream has the shapes of the OpenAI API's recorded streams.
func TestStreamShapes(t *testing.T) {
	s := NewServer()
	defer s.Close()
	s.Script(Reply{Text: "Hi there", ToolCalls: []ToolCall{{ID: "call_1", Name: "f", Arguments: `{"a":1}`, Split: 2}}, Usage: &Usage{PromptTokens: 3, CompletionTokens: 4}})
	body := `{"messages":[{"role":"user","content":"hi"}],"model":"m","stream":true,"stream_options":{"include_usage":true}}`
	res, got := post(t, s, body)
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	got = volatile.ReplaceAllString(got, `"id":"ID","object":"chat.completion.chunk","created":0`)
	const head = `data: {"id":"ID","object":"chat.completion.chunk","created":0,"model":"m","system_fingerprint":"fp_modeltest","choices":[{"index":0,"delta":`
	const tail = `,"logprobs":null,"finish_reason":null}]}` + "\n\n"
	want := head + `{"role":"assistant","content":"","refusal":null}` + tail +
		head + `{"content":"Hi "}` + tail +
		head + `{"content":"there"}` + tail +
		head + `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}` + tail +
		head + `{"tool_calls":[{"index":0,"function":{"arguments":"{\"a"}}]}` + tail +
		head + `{"tool_calls":[{"index":0,"function":{"arguments":"\":1}"}}]}` + tail +
		head + `{},"logprobs":null,"finish_reason":"tool_calls"}]}` + "\n\n" +
		`data: {"id":"ID","object":"chat.completion.chunk","created":0,"model":"m","system_fingerprint":"fp_modeltest","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"completion_tokens_details":{"reasoning_tokens":0}}}` + "\n\n" +
		"data: [DONE]\n\n"
	if got != want {
		t.Fatalf("stream\n%s\nwant\n%s", got, want)
	}
	if reqs := s.Requests(); len(reqs) != 1 || string(reqs[0].Body) != body {
		t.Fatalf("recorded %+v", reqs)
	}
}

// A reply of tool calls only opens with the first call in the role chunk,
// as OpenAI streams it.
func TestToolOnlyReplyOpensWithTheCall(t *testing.T) {
	s := NewServer()
	defer s.Close()
	s.Script(Reply{ToolCalls: []ToolCall{{ID: "c", Name: "f", Arguments: "{}", Split: 1}}})
	_, got := post(t, s, `{"model":"m","messages":[]}`)
	first, _, _ := strings.Cut(got, "\n\n")
	if !strings.Contains(first, `"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":""}}],"refusal":null}`) {
		t.Fatalf("first chunk %s", first)
	}
	if strings.Contains(got, `"usage"`) {
		t.Fatal("a usage chunk though the request did not ask for one")
	}
}

// Unscripted, the server echoes the last user message.
func TestEchoByDefault(t *testing.T) {
	s := NewServer()
	defer s.Close()
	_, got := post(t, s, `{"model":"m","messages":[{"role":"user","content":"one"},{"role":"assistant","content":"x"},{"role":"user","content":[{"type":"text","text":"two"}]}]}`)
	var text strings.Builder
	for _, m := range regexp.MustCompile(`"content":"([^"]*)"`).FindAllStringSubmatch(got, -1) {
		text.WriteString(m[1])
	}
	if text.String() != "model: two" {
		t.Fatalf("echoed %q", text.String())
	}
}

func TestErrorReply(t *testing.T) {
	s := NewServer()
	defer s.Close()
	s.Script(ErrorReply(429, "Rate limit reached", "Retry-After", "3"))
	res, got := post(t, s, `{}`)
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "3" ||
		got != `{"error":{"code":null,"message":"Rate limit reached","param":null,"type":"rate_limit_exceeded"}}` {
		t.Fatalf("%d %v %s", res.StatusCode, res.Header, got)
	}
}

// A cut stream ends the body early: the client sees an error, not EOF.
func TestCutDropsTheConnection(t *testing.T) {
	s := NewServer()
	defer s.Close()
	s.Script(Reply{Text: "a b c", Fault: Cut, FaultAfter: 1})
	res, err := http.Post(s.URL+"/chat/completions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err == nil || strings.Contains(string(b), "[DONE]") || !strings.Contains(string(b), `"content":"a "`) {
		t.Fatalf("read %q, %v; want the first delta then an error", b, err)
	}
}

// TokensPerSecond paces the deltas: 20 tokens at 200/s take 100 ms at least.
func TestTokenRate(t *testing.T) {
	s := NewServer()
	defer s.Close()
	s.Script(Reply{Text: strings.Repeat("tok ", 20), TokensPerSecond: 200})
	start := time.Now()
	_, got := post(t, s, `{"model":"m","messages":[]}`)
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("20 tokens at 200/s streamed in %s", d)
	}
	if n := strings.Count(got, `"content":"tok "`); n != 20 {
		t.Fatalf("%d deltas", n)
	}
}

func TestListenServesOnTheAddress(t *testing.T) {
	s, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Post(s.URL+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "data: [DONE]") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// Every delta's send time and the end of the stream are recorded, in
// order; a broken stream has no end.
func TestSendTimes(t *testing.T) {
	s := NewServer()
	defer s.Close()
	s.Script(
		Reply{Text: strings.Repeat("tok ", 5), ToolCalls: []ToolCall{{ID: "c", Name: "f", Arguments: `{"a":1}`, Split: 2}}, TokensPerSecond: 1000},
		Reply{Text: "a b c", Fault: Cut, FaultAfter: 2},
	)
	post(t, s, `{"model":"m","messages":[]}`)
	if res, err := http.Post(s.URL+"/chat/completions", "application/json", strings.NewReader(`{}`)); err == nil {
		_, _ = io.ReadAll(res.Body)
		res.Body.Close()
	}
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	// 5 content deltas, the tool call's header and its 2 fragments.
	r := reqs[0]
	if len(r.Sent) != 8 || r.Finished.IsZero() {
		t.Fatalf("sent %d deltas, finished %v", len(r.Sent), r.Finished)
	}
	prev := r.Received
	for i, at := range append(r.Sent, r.Finished) {
		if at.Before(prev) {
			t.Fatalf("time %d (%v) before the one before it (%v)", i, at, prev)
		}
		prev = at
	}
	if cut := reqs[1]; len(cut.Sent) != 2 || !cut.Finished.IsZero() {
		t.Fatalf("cut stream: sent %d, finished %v", len(cut.Sent), cut.Finished)
	}
}
