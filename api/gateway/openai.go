package gateway

import "encoding/json"

// OpenAI usage (research notes §4). Chat Completions: the last chunk's
// usage (with stream_options.include_usage, which the gateway adds),
// prompt_tokens including the cached ones. Responses: the usage of
// response.completed (or .incomplete/.failed), input_tokens including the
// cached ones. The cached part is priced as a cache read.

type chatUsage struct {
	PromptTokens        uint64 `json:"prompt_tokens"`
	CompletionTokens    uint64 `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens uint64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (c *chatUsage) usage(model string) Usage {
	cached := min(c.PromptTokensDetails.CachedTokens, c.PromptTokens)
	return Usage{Model: model, InputTokens: c.PromptTokens - cached, CacheReadTokens: cached,
		OutputTokens: c.CompletionTokens, Seen: true}
}

type responsesUsage struct {
	InputTokens        uint64 `json:"input_tokens"`
	OutputTokens       uint64 `json:"output_tokens"`
	InputTokensDetails struct {
		CachedTokens uint64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

func (r *responsesUsage) usage(model string) Usage {
	cached := min(r.InputTokensDetails.CachedTokens, r.InputTokens)
	return Usage{Model: model, InputTokens: r.InputTokens - cached, CacheReadTokens: cached,
		OutputTokens: r.OutputTokens, Seen: true}
}

// openAIStream keeps the last payload that mentions usage; the last
// chunk of a Chat Completions stream, response.completed of a Responses
// stream, holds the call's.
type openAIStream struct {
	sseReader
	parse func([]byte) Usage
}

func newChatStream() *openAIStream {
	s := &openAIStream{parse: chatBody}
	s.hint = [][]byte{[]byte(`"usage":{`)}
	return s
}

func newResponsesStream() *openAIStream {
	s := &openAIStream{parse: func(p []byte) Usage {
		var ev struct {
			Response json.RawMessage `json:"response"`
		}
		if !decode(p, &ev) {
			return Usage{}
		}
		return responsesBody(ev.Response)
	}}
	s.hint = [][]byte{[]byte(`"usage":{`)}
	return s
}

func (s *openAIStream) Usage() Usage {
	if p := s.payload(0); p != nil {
		return s.parse(p)
	}
	return Usage{}
}

func chatBody(body []byte) Usage {
	var c struct {
		Model string     `json:"model"`
		Usage *chatUsage `json:"usage"`
	}
	if !decode(body, &c) || c.Usage == nil {
		return Usage{}
	}
	return c.Usage.usage(c.Model)
}

func responsesBody(body []byte) Usage {
	var r struct {
		Model string          `json:"model"`
		Usage *responsesUsage `json:"usage"`
	}
	if !decode(body, &r) || r.Usage == nil {
		return Usage{}
	}
	return r.Usage.usage(r.Model)
}
