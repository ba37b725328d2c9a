package gateway

// Anthropic Messages usage (research notes §5): input and cache counts
// from message_start, overwritten by any in the cumulative message_delta;
// output from the last message_delta. input_tokens excludes the cache
// reads and writes, which are priced apart.

type anthropicUsage struct {
	InputTokens              *uint64 `json:"input_tokens"`
	CacheCreationInputTokens *uint64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *uint64 `json:"cache_read_input_tokens"`
	OutputTokens             *uint64 `json:"output_tokens"`
}

// merge overwrites u with the counts a reports.
func (a *anthropicUsage) merge(u *Usage) {
	if a == nil {
		return
	}
	set := func(dst *uint64, v *uint64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&u.InputTokens, a.InputTokens)
	set(&u.CacheWriteTokens, a.CacheCreationInputTokens)
	set(&u.CacheReadTokens, a.CacheReadInputTokens)
	set(&u.OutputTokens, a.OutputTokens)
	u.Seen = true
}

type anthropicStream struct {
	sseReader
	u Usage
}

func newAnthropicStream() *anthropicStream {
	s := &anthropicStream{}
	s.hint = [][]byte{[]byte(`"message_start"`), []byte(`"message_delta"`)}
	s.onData = func(payload []byte) {
		var ev struct {
			Type    string `json:"type"`
			Message struct {
				Model string          `json:"model"`
				Usage *anthropicUsage `json:"usage"`
			} `json:"message"`
			Usage *anthropicUsage `json:"usage"`
		}
		if !decode(payload, &ev) {
			return
		}
		switch ev.Type {
		case "message_start":
			if ev.Message.Model != "" {
				s.u.Model = ev.Message.Model
			}
			ev.Message.Usage.merge(&s.u)
		case "message_delta":
			ev.Usage.merge(&s.u)
		}
	}
	return s
}

func (s *anthropicStream) Usage() Usage { return s.u }

func anthropicBody(body []byte) Usage {
	var m struct {
		Model string          `json:"model"`
		Usage *anthropicUsage `json:"usage"`
	}
	var u Usage
	if decode(body, &m) {
		u.Model = m.Model
		m.Usage.merge(&u)
	}
	return u
}
