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

type anthropicStream struct{ sseReader }

func newAnthropicStream() *anthropicStream {
	s := &anthropicStream{}
	s.hint = [][]byte{[]byte(`"message_start"`), []byte(`"message_delta"`)}
	return s
}

func (s *anthropicStream) Usage() Usage {
	var u Usage
	var start struct {
		Message struct {
			Model string          `json:"model"`
			Usage *anthropicUsage `json:"usage"`
		} `json:"message"`
	}
	if p := s.payload(0); p != nil && decode(p, &start) {
		u.Model = start.Message.Model
		start.Message.Usage.merge(&u)
	}
	var delta struct {
		Usage *anthropicUsage `json:"usage"`
	}
	if p := s.payload(1); p != nil && decode(p, &delta) {
		delta.Usage.merge(&u) // cumulative: the last one holds the totals
	}
	return u
}

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
