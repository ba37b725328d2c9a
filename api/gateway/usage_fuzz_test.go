package gateway

import (
	"bytes"
	"testing"
)

// FuzzUsageReaders: an upstream (or something posing as one) may answer
// anything. Every usage reader, fed any bytes in any cut, never panics,
// and reads the same usage whether the bytes come at once or one at a
// time: a line split across network reads is read once.
func FuzzUsageReaders(f *testing.F) {
	for _, name := range []string{"anthropic_tool_use.sse", "gemini.sse", "openai_chat_tool.sse", "openai_responses.sse"} {
		b, err := readFixture(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(7))
	}
	f.Add([]byte(`{"usage":{"input_tokens":5,"output_tokens":7},"model":"m"}`), uint8(1))
	f.Add([]byte("data: {\"usage\":null}\n\ndata: [DONE]\n\n"), uint8(3))
	f.Add([]byte("data: {\"usageMetadata\":{\"promptTokenCount\":-1}}\r\n\r\n"), uint8(2))
	readers := map[string]func() usageReader{
		"anthropic stream": func() usageReader { return newAnthropicStream() },
		"anthropic body":   func() usageReader { return &bodyReader{parse: anthropicBody} },
		"gemini stream":    func() usageReader { return newGeminiSSE() },
		"gemini body":      func() usageReader { return &bodyReader{parse: geminiBody} },
		"responses stream": func() usageReader { return newResponsesStream() },
		"responses body":   func() usageReader { return &bodyReader{parse: responsesBody} },
		"chat stream":      func() usageReader { return newChatStream() },
		"chat body":        func() usageReader { return &bodyReader{parse: chatBody} },
	}
	f.Fuzz(func(t *testing.T, body []byte, cut uint8) {
		n := int(cut)%64 + 1
		for name, mk := range readers {
			whole := feed(mk(), bytes.Clone(body), len(body)+1)
			pieces := feed(mk(), bytes.Clone(body), n)
			if whole != pieces {
				t.Fatalf("%s: %+v at once, %+v in pieces of %d", name, whole, pieces, n)
			}
		}
	})
}
