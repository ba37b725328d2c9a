package provider

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
)

// claude runs Claude Code in print mode with stream-json both ways (notes
// §1): the prompt and fak's control answers on stdin, its messages on
// stdout. Stdin stays open for the control protocol (permission prompts)
// until the result line.
type claude struct{}

// claudeGatewayConflicts are variables that would take Claude Code past
// the gateway: an API key wins over ANTHROPIC_AUTH_TOKEN (notes §1.5),
// Bedrock and Vertex use their own endpoints.
var claudeGatewayConflicts = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN",
	"ANTHROPIC_CUSTOM_HEADERS", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"}

func (claude) invoke(rt *runtime, p plan) (invocation, error) {
	args := []string{"-p", "--output-format", "stream-json", "--verbose", "--input-format", "stream-json"}
	if rt.o.Model != "" {
		args = append(args, "--model", rt.o.Model)
	}
	if rt.o.Policy == PolicyAsk {
		args = append(args, "--permission-prompt-tool", "stdio")
	} else {
		args = append(args, "--permission-mode", rt.o.Policy)
	}
	// The "=" forms: an id starting with a dash cannot become a flag.
	if p.resume != "" {
		args = append(args, "--resume="+p.resume)
	} else {
		args = append(args, "--session-id="+newUUID())
	}
	inv := invocation{args: args, stdin: true}
	if g := rt.o.Gateway; g != nil {
		inv.env = []string{
			"ANTHROPIC_BASE_URL=" + g.URL + "/gateway/anthropic",
			"ANTHROPIC_AUTH_TOKEN=" + g.Key,
			"ANTHROPIC_CUSTOM_HEADERS=" + traceHeader + ": " + headerValue(rt.ep.SessionID),
		}
		inv.drop = claudeGatewayConflicts
	}
	return inv, nil
}

func (claude) handler(rt *runtime, p plan) handler {
	return &claudeTurn{prompt: p.prompt, calls: map[string]bool{}}
}

// claudeTurn is one claude process's lines.
type claudeTurn struct {
	prompt string
	calls  map[string]bool // tool_use ids journaled
}

// The lines fak writes (the official SDK's, notes §1.1 and §1.3).
type (
	claudeControlRequest struct {
		Type      string `json:"type"` // "control_request"
		RequestID string `json:"request_id"`
		Request   struct {
			Subtype string `json:"subtype"` // "initialize"
			Hooks   any    `json:"hooks"`
		} `json:"request"`
	}
	claudeUserMessage struct {
		Type    string `json:"type"` // "user"
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		ParentToolUseID *string `json:"parent_tool_use_id"`
		SessionID       string  `json:"session_id"`
	}
)

// begin: the SDK's initialize request, then the prompt as the user's
// message. The CLI answers initialize with a control_response, ignored.
func (c *claudeTurn) begin(s *stream) {
	var init claudeControlRequest
	init.Type, init.RequestID, init.Request.Subtype = "control_request", "req_1_"+randomHex(4), "initialize"
	var user claudeUserMessage
	user.Type, user.Message.Role, user.Message.Content = "user", "user", c.prompt
	s.pr.Send(encodeLine(init))
	s.pr.Send(encodeLine(user))
}

// The lines claude writes, as far as fak reads them (notes §1.2).
type (
	claudeLine struct {
		SessionID       string         `json:"session_id"`
		ParentToolUseID *string        `json:"parent_tool_use_id"`
		Message         *claudeMessage `json:"message"`
	}
	claudeMessage struct {
		Content json.RawMessage `json:"content"` // blocks; a user message's may be a string
	}
	claudeBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
	}
	claudeResult struct {
		Subtype      string          `json:"subtype"`
		IsError      bool            `json:"is_error"`
		NumTurns     uint64          `json:"num_turns"`
		Result       json.RawMessage `json:"result"`
		SessionID    string          `json:"session_id"`
		TotalCostUSD float64         `json:"total_cost_usd"`
		Usage        json.RawMessage `json:"usage"`
		Errors       json.RawMessage `json:"errors"`
	}
	claudeUsage struct {
		InputTokens              uint64 `json:"input_tokens"`
		CacheCreationInputTokens uint64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     uint64 `json:"cache_read_input_tokens"`
		OutputTokens             uint64 `json:"output_tokens"`
	}
)

func (c *claudeTurn) line(s *stream, typ string, line []byte) error {
	switch typ {
	case "assistant", "user", "system":
		var l claudeLine
		if err := decode(line, typ, &l); err != nil {
			return s.fail("%v", err)
		}
		// system/init names the thread first; every later line names it
		// too.
		s.bind(l.SessionID)
		if typ == "system" || l.Message == nil {
			return nil
		}
		blocks, err := claudeBlocks(l.Message.Content, typ == "user")
		if err != nil {
			return s.fail("%s: %v", typ, err)
		}
		return c.blocks(s, blocks, l.ParentToolUseID)
	case "result":
		return c.result(s, line)
	case "control_request":
		return c.control(s, line)
	case "control_response", "control_cancel_request", "stream_event", "rate_limit_event", "keep_alive":
		// Our initialize's answer; a cancel of a permission prompt fak
		// is already waiting on (its answer then goes unread); partial
		// messages (not asked for); rate limit notices.
		return nil
	}
	s.rt.o.Logger.Debug("ignored a line of an unknown type", "provider", ProviderClaude, "type", typ)
	return nil
}

// claudeBlocks decodes a message's content: blocks, or for a user
// message a plain string (a prompt echoed back), which holds none.
func claudeBlocks(content json.RawMessage, user bool) ([]claudeBlock, error) {
	if len(content) == 0 || string(content) == "null" {
		return nil, nil
	}
	var text string
	if user && json.Unmarshal(content, &text) == nil {
		return nil, nil
	}
	var blocks []claudeBlock
	if err := json.Unmarshal(content, &blocks); err != nil {
		return nil, fmt.Errorf("message content: %v", err)
	}
	return blocks, nil
}

// blocks maps a message's content: text is output, tool_use a tool.call,
// tool_result a tool.result; thinking and server tools are not journaled.
// A subagent's messages (parent_tool_use_id set) journal their tool calls
// but not their text: the subagent's answer comes back as the result of
// the tool that ran it.
func (c *claudeTurn) blocks(s *stream, blocks []claudeBlock, parent *string) error {
	var extra map[string]any
	sub := parent != nil && *parent != ""
	if sub {
		extra = map[string]any{"parent_tool_use_id": *parent}
	}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if !sub {
				if err := s.text(b.Text, true); err != nil {
					return err
				}
			}
		case "tool_use":
			if b.ID != "" && c.calls[b.ID] {
				continue // the same message again
			}
			c.calls[b.ID] = true
			if err := s.toolCall(b.ID, b.Name, b.Input, extra); err != nil {
				return err
			}
		case "tool_result":
			out := claudeContent(b.Content)
			x := map[string]any{"content": runner.Truncate(out, toolDataBytes)}
			if len(out) > toolDataBytes {
				x["content_truncated"] = true
			}
			if sub {
				x["parent_tool_use_id"] = *parent
			}
			if err := s.toolResult(b.ToolUseID, out, b.IsError, x); err != nil {
				return err
			}
		}
	}
	return nil
}

// claudeContent is a tool result's content as text: a string, or its
// text blocks joined (an image is "[image]").
func claudeContent(content json.RawMessage) string {
	var text string
	if json.Unmarshal(content, &text) == nil {
		return text
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return jsonString(content)
	}
	parts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		} else {
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// result ends the turn. Its usage covers the whole process (the
// per-call usage on assistant lines must not be added up, notes §1.2);
// whether it covers earlier processes of a resumed thread as well is
// unverified (notes §6): the gateway is the reliable meter.
func (c *claudeTurn) result(s *stream, line []byte) error {
	var r claudeResult
	if err := decode(line, "result", &r); err != nil {
		return s.fail("%v", err)
	}
	s.bind(r.SessionID)
	var u claudeUsage
	if len(r.Usage) > 0 && string(r.Usage) != "null" {
		if err := json.Unmarshal(r.Usage, &u); err != nil {
			return s.fail("result: usage: %v", err)
		}
	}
	facts := map[string]any{"num_turns": r.NumTurns, "total_cost_usd": r.TotalCostUSD}
	if usage, _ := rawJSON(r.Usage); string(usage) != "null" {
		facts["usage"] = usage
	}
	end := &ending{facts: facts, usage: &fsmpb.Budget{
		InputTokens:  u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
		OutputTokens: u.OutputTokens,
		Queries:      furtherQueries(max(r.NumTurns, 1)),
		SpendMicros:  uint64(math.Round(max(r.TotalCostUSD, 0) * 1e6)),
		ToolCalls:    s.toolCalls,
	}}
	if r.IsError || (r.Subtype != "" && r.Subtype != "success") {
		end.failure = claudeFailure(r)
	}
	s.end = end
	return nil
}

// claudeFailure says why a result failed: its text, its errors, its
// subtype. An API failure can come as subtype success with is_error.
func claudeFailure(r claudeResult) string {
	why := []string{"claude: " + orDefault(r.Subtype, "error")}
	if text := jsonString(r.Result); text != "" {
		why = append(why, text)
	}
	var errs []json.RawMessage
	if json.Unmarshal(r.Errors, &errs) == nil {
		for _, e := range errs {
			why = append(why, jsonString(e))
		}
	}
	return runner.Truncate(strings.Join(why, ": "), 4*summaryBytes)
}

// newUUID is a random (version 4) UUID: claude's id of a new thread.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
