package gateway

import (
	"bytes"
	"encoding/json"
)

// Gemini usage (research notes §3.5): every chunk of a stream may carry
// usageMetadata; the last one holds the call's totals. promptTokenCount
// includes cachedContentTokenCount (priced as a cache read); tool-use
// prompt tokens are input, thoughts are output. The exact URL paths were
// not verified against a live CLI: the gateway serves any path under
// /gateway/gemini/ and meters those ending in :generateContent or
// :streamGenerateContent, SSE (alt=sse) or a streamed JSON array.

type geminiUsage struct {
	PromptTokenCount        uint64 `json:"promptTokenCount"`
	CandidatesTokenCount    uint64 `json:"candidatesTokenCount"`
	CachedContentTokenCount uint64 `json:"cachedContentTokenCount"`
	ThoughtsTokenCount      uint64 `json:"thoughtsTokenCount"`
	ToolUsePromptTokenCount uint64 `json:"toolUsePromptTokenCount"`
}

type geminiChunk struct {
	ModelVersion  string       `json:"modelVersion"`
	UsageMetadata *geminiUsage `json:"usageMetadata"`
}

// take reads the chunk's usage into u when it has any.
func (c *geminiChunk) take(u *Usage) {
	if c.ModelVersion != "" {
		u.Model = c.ModelVersion
	}
	g := c.UsageMetadata
	if g == nil {
		return
	}
	cached := min(g.CachedContentTokenCount, g.PromptTokenCount)
	u.InputTokens = g.PromptTokenCount - cached + g.ToolUsePromptTokenCount
	u.CacheReadTokens = cached
	u.OutputTokens = g.CandidatesTokenCount + g.ThoughtsTokenCount
	u.Seen = true
}

type geminiStream struct{ sseReader }

func newGeminiSSE() *geminiStream {
	s := &geminiStream{}
	s.hint = [][]byte{[]byte(`"usageMetadata":{`)}
	return s
}

func (s *geminiStream) Usage() Usage {
	var u Usage
	var c geminiChunk
	if p := s.payload(0); p != nil && decode(p, &c) {
		c.take(&u)
	}
	return u
}

// geminiBody reads a generateContent body (one object) or a
// streamGenerateContent body without alt=sse (a JSON array of chunks,
// possibly cut short: the chunks before the cut count).
func geminiBody(body []byte) Usage {
	var u Usage
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return u
	}
	if body[0] != '[' {
		var c geminiChunk
		if decode(body, &c) {
			c.take(&u)
		}
		return u
	}
	d := json.NewDecoder(bytes.NewReader(body))
	if _, err := d.Token(); err != nil { // [
		return u
	}
	for d.More() {
		var c geminiChunk
		if d.Decode(&c) != nil {
			break
		}
		c.take(&u)
	}
	return u
}
