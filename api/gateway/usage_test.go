package gateway

import (
	"os"
	"path/filepath"
	"testing"
)

// feed writes body to r in chunks of n bytes, as a network delivers it.
func feed(r usageReader, body []byte, n int) Usage {
	for len(body) > 0 {
		k := min(n, len(body))
		_, _ = r.Write(body[:k])
		body = body[k:]
	}
	return r.Usage()
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := readFixture(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readFixture(name string) ([]byte, error) { return os.ReadFile(filepath.Join("testdata", name)) }

// The recorded streams of the research notes (§4, §5; the Gemini stream
// is built from the usageMetadata field names there), cut into chunks of
// every size from 1 byte up: a line split across reads is read once.
func TestUsageReaders(t *testing.T) {
	cases := []struct {
		name    string
		fixture string
		reader  func() usageReader
		want    Usage
	}{
		{"anthropic stream", "anthropic_tool_use.sse", func() usageReader { return newAnthropicStream() },
			Usage{Model: "claude-sonnet-4-20250514", InputTokens: 377, OutputTokens: 65, Seen: true}},
		{"chat stream", "openai_chat_tool.sse", func() usageReader { return newChatStream() },
			Usage{Model: "gpt-4o-2024-08-06", InputTokens: 76, OutputTokens: 24, Seen: true}},
		{"responses stream", "openai_responses.sse", func() usageReader { return newResponsesStream() },
			Usage{Model: "gpt-5.4-mini", InputTokens: 32161 - 1920, CacheReadTokens: 1920, OutputTokens: 47, Seen: true}},
		{"gemini sse", "gemini.sse", func() usageReader { return newGeminiSSE() },
			Usage{Model: "gemini-2.5-pro", InputTokens: 8, CacheReadTokens: 4, OutputTokens: 8, Seen: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := fixture(t, c.fixture)
			for _, n := range []int{1, 2, 7, 64, 1 << 20} {
				if got := feed(c.reader(), body, n); got != c.want {
					t.Fatalf("chunks of %d bytes: usage %+v, want %+v", n, got, c.want)
				}
			}
		})
	}
}

func TestUsageOfBodies(t *testing.T) {
	cases := []struct {
		name  string
		parse func([]byte) Usage
		body  string
		want  Usage
	}{
		{"anthropic", anthropicBody, `{"id":"msg_1","type":"message","model":"claude-opus-4","content":[],"usage":{"input_tokens":2,"cache_creation_input_tokens":10,"cache_read_input_tokens":9600,"output_tokens":58}}`,
			Usage{Model: "claude-opus-4", InputTokens: 2, CacheWriteTokens: 10, CacheReadTokens: 9600, OutputTokens: 58, Seen: true}},
		{"chat", chatBody, `{"id":"c","model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":14,"completion_tokens":30,"total_tokens":44,"prompt_tokens_details":{"cached_tokens":4}}}`,
			Usage{Model: "gpt-4.1", InputTokens: 10, CacheReadTokens: 4, OutputTokens: 30, Seen: true}},
		{"responses", responsesBody, `{"id":"r","model":"gpt-5","usage":{"input_tokens":24763,"input_tokens_details":{"cached_tokens":24448},"output_tokens":122}}`,
			Usage{Model: "gpt-5", InputTokens: 315, CacheReadTokens: 24448, OutputTokens: 122, Seen: true}},
		{"gemini object", geminiBody, `{"candidates":[],"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":20,"toolUsePromptTokenCount":5},"modelVersion":"gemini-2.5-flash"}`,
			Usage{Model: "gemini-2.5-flash", InputTokens: 105, OutputTokens: 20, Seen: true}},
		{"gemini array", geminiBody, `[{"usageMetadata":{"promptTokenCount":9}},{"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":4}}]`,
			Usage{InputTokens: 9, OutputTokens: 4, Seen: true}},
		// A stream cut short: the chunks before the cut count.
		{"gemini array cut", geminiBody, `[{"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":2}},{"usageMeta`,
			Usage{InputTokens: 9, OutputTokens: 2, Seen: true}},
		{"garbage", chatBody, `<html>`, Usage{}},
	}
	for _, c := range cases {
		if got := c.parse([]byte(c.body)); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestPriceTable(t *testing.T) {
	pt, err := NewPriceTable(map[string]Price{
		"claude-sonnet-4*":         {InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.3, CacheWritePerMTok: 3.75},
		"claude-*":                 {InputPerMTok: 1, OutputPerMTok: 5},
		"claude-sonnet-4-20250514": {InputPerMTok: 2, OutputPerMTok: 10},
	})
	if err != nil {
		t.Fatal(err)
	}
	u := Usage{Model: "claude-sonnet-4-5", InputTokens: 1000, CacheReadTokens: 10000, CacheWriteTokens: 2000, OutputTokens: 500}
	b := pt.Budget(u)
	// 1000×3 + 500×15 + 10000×0.3 + 2000×3.75 = 3000+7500+3000+7500 micros.
	if b.SpendMicros != 21000 || b.InputTokens != 13000 || b.OutputTokens != 500 || b.Queries != 1 {
		t.Fatalf("longest prefix: %v", b)
	}
	if p, _ := pt.Lookup("claude-sonnet-4-20250514"); p.InputPerMTok != 2 {
		t.Fatalf("an exact name beats every prefix: %+v", p)
	}
	if p, _ := pt.Lookup("claude-haiku"); p.InputPerMTok != 1 {
		t.Fatalf("the shorter prefix: %+v", p)
	}
	if b := pt.Budget(Usage{Model: "llama", InputTokens: 5, OutputTokens: 7}); b.SpendMicros != 0 || b.InputTokens != 5 {
		t.Fatalf("an unpriced model counts tokens, costs nothing: %v", b)
	}
	if _, err := NewPriceTable(map[string]Price{"x": {InputPerMTok: -1}}); err == nil {
		t.Fatal("a negative price must be refused")
	}
}
