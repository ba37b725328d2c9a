package provider

import (
	"encoding/json"
	"strings"

	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/internal/tomlquote"
	"github.com/fak-dev/fak/node/runner"
)

// codex runs codex exec with JSON lines out (notes §2): the prompt on
// stdin ("-"), which then closes; exec cannot ask anyone for approvals,
// its sandbox level decides.
type codex struct{}

// codexGatewayKey is the variable codex reads the gateway's key from (the
// fak provider's env_key).
const codexGatewayKey = "FAK_GATEWAY_KEY"

// invoke builds `codex exec --json [--model M] --sandbox LEVEL
// --skip-git-repo-check [-c gateway...] [resume ID] -`. The exec flags go
// before the resume subcommand, the form the notes give (`codex exec
// --json [flags] resume <id> "<prompt>"`, §2.1); unverified: that every
// codex version applies them to a resumed thread, and that resume takes
// "-" for a prompt on stdin as exec does.
func (codex) invoke(rt *runtime, p plan) (invocation, error) {
	args := []string{"exec", "--json"}
	if rt.o.Model != "" {
		args = append(args, "--model", rt.o.Model)
	}
	args = append(args, "--sandbox", rt.o.Policy, "--skip-git-repo-check")
	var env []string
	if g := rt.o.Gateway; g != nil {
		// A provider of fak's own: the OPENAI_BASE_URL variable is gone
		// (notes §2.5), codex speaks only the Responses API, and the
		// websocket transport would bypass a plain HTTP gateway.
		provider := "{name=" + tomlquote.String("fak") +
			",base_url=" + tomlquote.String(g.URL+"/gateway/openai/v1") +
			",env_key=" + tomlquote.String(codexGatewayKey) +
			",wire_api=" + tomlquote.String("responses") +
			",supports_websockets=false" +
			",http_headers={" + tomlquote.String(traceHeader) + "=" + tomlquote.String(headerValue(rt.ep.SessionID)) + "}}"
		args = append(args, "-c", "model_provider=fak", "-c", "model_providers.fak="+provider)
		env = append(env, codexGatewayKey+"="+g.Key)
	}
	if p.resume != "" {
		args = append(args, "resume", p.resume)
	}
	return invocation{args: append(args, "-"), env: env, stdin: true}, nil
}

func (codex) handler(rt *runtime, p plan) handler {
	return &codexTurn{prompt: p.prompt, called: map[string]bool{}}
}

// codexTurn is one codex process's lines.
type codexTurn struct {
	prompt string
	called map[string]bool // items whose tool.call is journaled
	calls  uint64          // commands and MCP calls, charged as tool calls
}

// begin writes the prompt and closes stdin: codex reads it to its end.
func (c *codexTurn) begin(s *stream) {
	s.pr.Send([]byte(c.prompt))
	s.pr.CloseStdin()
}

// The lines codex writes, as far as fak reads them (notes §2.2).
type (
	codexLine struct {
		ThreadID string          `json:"thread_id"`
		Usage    json.RawMessage `json:"usage"`
		Error    *struct {
			Message string `json:"message"`
		} `json:"error"`
		Message string     `json:"message"`
		Item    *codexItem `json:"item"`
	}
	codexItem struct {
		ID               string          `json:"id"`
		Type             string          `json:"type"`
		Text             string          `json:"text"`
		Command          json.RawMessage `json:"command"`
		AggregatedOutput string          `json:"aggregated_output"`
		ExitCode         *int            `json:"exit_code"`
		Status           string          `json:"status"`
		Changes          json.RawMessage `json:"changes"`
		Server           string          `json:"server"`
		Tool             string          `json:"tool"`
		Arguments        json.RawMessage `json:"arguments"`
		Result           json.RawMessage `json:"result"`
		Error            json.RawMessage `json:"error"`
		Message          string          `json:"message"`
		Query            string          `json:"query"`
	}
	codexUsage struct {
		InputTokens  uint64 `json:"input_tokens"`
		OutputTokens uint64 `json:"output_tokens"`
	}
)

func (c *codexTurn) line(s *stream, typ string, line []byte) error {
	var l codexLine
	if err := decode(line, typ, &l); err != nil {
		return s.fail("%v", err)
	}
	switch typ {
	case "thread.started":
		s.bind(l.ThreadID)
	case "item.started", "item.completed":
		if l.Item == nil {
			return s.fail("%s: no item", typ)
		}
		return c.item(s, typ == "item.completed", l.Item)
	case "turn.completed":
		return c.completed(s, l.Usage)
	case "turn.failed":
		msg := "codex: the turn failed"
		if l.Error != nil && l.Error.Message != "" {
			msg = "codex: " + l.Error.Message
		}
		s.end = &ending{failure: msg}
	case "error":
		// Fatal by the notes (§2.2), yet some versions report a retried
		// stream this way and carry on: the turn fails with it unless
		// turn.completed follows.
		s.failure = "codex: " + orDefault(l.Message, "error")
		s.rt.o.Logger.Warn("codex reported an error", "session", s.rt.ep.SessionID, "message", l.Message)
	case "turn.started", "item.updated":
		// item.updated carries a todo list's or a file change's
		// progress; the call and its result are journaled at start and
		// completion.
	default:
		s.rt.o.Logger.Debug("ignored a line of an unknown type", "provider", ProviderCodex, "type", typ)
	}
	return nil
}

// item maps one item's start or completion. Messages arrive whole, at
// completion; tools journal their call at start (or at completion when no
// start was seen) and their result at completion. Reasoning and todo
// lists are not output; error items are warnings.
func (c *codexTurn) item(s *stream, completed bool, it *codexItem) error {
	switch it.Type {
	case "agent_message":
		if completed {
			return s.text(it.Text, true)
		}
	case "command_execution", "file_change", "mcp_tool_call", "web_search":
		if !c.called[it.ID] {
			c.called[it.ID] = true
			if it.Type == "command_execution" || it.Type == "mcp_tool_call" {
				c.calls++
			}
			name, input := codexCall(it)
			if err := s.toolCall(it.ID, name, input, nil); err != nil {
				return err
			}
		}
		if completed {
			return codexResult(s, it)
		}
	case "error":
		s.rt.o.Logger.Warn("codex warned", "session", s.rt.ep.SessionID, "message", it.Message)
	case "reasoning", "todo_list":
	default:
		s.rt.o.Logger.Debug("ignored an item of an unknown type", "provider", ProviderCodex, "type", it.Type)
	}
	return nil
}

// codexCall is a tool item's name and input as tool.call journals them.
func codexCall(it *codexItem) (string, json.RawMessage) {
	switch it.Type {
	case "command_execution":
		return it.Type, marshal(map[string]any{"command": codexCommand(it.Command)})
	case "file_change":
		changes, _ := rawJSON(it.Changes)
		return it.Type, marshal(map[string]any{"changes": changes})
	case "mcp_tool_call":
		args, _ := rawJSON(it.Arguments)
		name := it.Type
		if it.Server != "" && it.Tool != "" {
			name = it.Server + "." + it.Tool
		}
		return name, marshal(map[string]any{"server": it.Server, "tool": it.Tool, "arguments": args})
	}
	return it.Type, marshal(map[string]any{"query": it.Query})
}

// codexCommand is a command as one string: the notes show a string; an
// argv array is joined.
func codexCommand(raw json.RawMessage) string {
	var argv []string
	if json.Unmarshal(raw, &argv) == nil {
		return strings.Join(argv, " ")
	}
	return jsonString(raw)
}

// codexResult journals a completed tool item's result.
func codexResult(s *stream, it *codexItem) error {
	failed := it.Status == "failed" || it.Status == "declined"
	switch it.Type {
	case "command_execution":
		failed = failed || it.ExitCode != nil && *it.ExitCode != 0
		x := map[string]any{"output": runner.Truncate(it.AggregatedOutput, toolDataBytes), "exit_code": it.ExitCode, "status": it.Status}
		return s.toolResult(it.ID, it.AggregatedOutput, failed, x)
	case "file_change":
		changes, _ := rawJSON(it.Changes)
		return s.toolResult(it.ID, codexChanges(it.Changes), failed, map[string]any{"changes": changes, "status": it.Status})
	case "mcp_tool_call":
		result, _ := rawJSON(it.Result)
		errv, _ := rawJSON(it.Error)
		text := jsonString(it.Result)
		if string(errv) != "null" {
			failed = true
			text = jsonString(it.Error)
		}
		return s.toolResult(it.ID, text, failed, map[string]any{"result": result, "error": errv, "status": it.Status})
	}
	return s.toolResult(it.ID, it.Query, failed, map[string]any{"status": it.Status})
}

// codexChanges says what a file change did, a line per file ("update
// src/main.rs").
func codexChanges(raw json.RawMessage) string {
	var changes []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	}
	if json.Unmarshal(raw, &changes) != nil {
		return jsonString(raw)
	}
	lines := make([]string, 0, len(changes))
	for _, ch := range changes {
		lines = append(lines, strings.TrimSpace(ch.Kind+" "+ch.Path))
	}
	return strings.Join(lines, "\n")
}

// completed ends the turn. input_tokens counts the cached ones too (the
// Responses API's usage); whether a resumed thread's usage covers its
// earlier runs is unverified (notes §2.2): the gateway is the reliable
// meter.
func (c *codexTurn) completed(s *stream, raw json.RawMessage) error {
	var u codexUsage
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &u); err != nil {
			return s.fail("turn.completed: usage: %v", err)
		}
	}
	facts := map[string]any{}
	if usage, _ := rawJSON(raw); string(usage) != "null" {
		facts["usage"] = usage
	}
	s.end = &ending{facts: facts, usage: &fsmpb.Budget{
		InputTokens:  u.InputTokens,
		OutputTokens: u.OutputTokens,
		Queries:      furtherQueries(1), // exec reports no count of model calls
		ToolCalls:    c.calls,
	}}
	return nil
}
