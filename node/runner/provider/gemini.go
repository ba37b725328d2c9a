package provider

import (
	"encoding/json"

	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
)

// gemini runs Gemini CLI headless with stream-json out (notes §3): the
// prompt as an argument, stdin /dev/null (piped stdin would be read and
// prepended to the prompt). Headless gemini asks no one: what its
// approval mode would ask about is denied.
type gemini struct{}

// maxArgBytes is the kernel's bound on one argument (MAX_ARG_STRLEN, 32
// pages, its terminating NUL included).
const maxArgBytes = 128<<10 - 1

// geminiGatewayConflicts are variables that would take Gemini CLI past
// the gateway: Code Assist and Vertex win over GOOGLE_GEMINI_BASE_URL
// (notes §3.5).
var geminiGatewayConflicts = []string{"GOOGLE_GENAI_USE_GCA", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GEMINI_BASE_URL",
	"GEMINI_API_KEY", "GEMINI_CLI_CUSTOM_HEADERS", "GOOGLE_API_KEY"}

// invoke builds `gemini -o stream-json --approval-mode MODE [--model M]
// [--resume ID] --prompt=PROMPT`: the "=" form, so a prompt starting with
// a dash cannot become a flag.
func (gemini) invoke(rt *runtime, p plan) (invocation, error) {
	args := []string{"-o", "stream-json", "--approval-mode", rt.o.Policy}
	if rt.o.Model != "" {
		args = append(args, "--model", rt.o.Model)
	}
	if p.resume != "" {
		args = append(args, "--resume", p.resume)
	}
	prompt := "--prompt=" + p.prompt
	if len(prompt) > maxArgBytes {
		return invocation{}, runner.Failf(ReasonPromptTooLarge,
			"gemini takes the prompt as one argument, at most %d bytes; this one is %d", maxArgBytes, len(prompt))
	}
	// Headless gemini forces the default approval mode in a folder it does
	// not trust (notes §3.3); the workspace is the session's.
	env := []string{"GEMINI_CLI_TRUST_WORKSPACE=true"}
	inv := invocation{args: append(args, prompt), env: env}
	if g := rt.o.Gateway; g != nil {
		// Unverified: that a selectedType in the user's settings.json
		// does not win over these (notes §3.5 says it does for the
		// auth type).
		inv.env = append(inv.env,
			"GOOGLE_GEMINI_BASE_URL="+g.URL+"/gateway/gemini",
			"GEMINI_API_KEY="+g.Key,
			"GEMINI_CLI_CUSTOM_HEADERS="+traceHeader+": "+headerValue(rt.ep.SessionID),
		)
		inv.drop = geminiGatewayConflicts
	}
	return inv, nil
}

func (gemini) handler(*runtime, plan) handler { return &geminiTurn{} }

// geminiTurn is one gemini process's lines.
type geminiTurn struct{}

func (g *geminiTurn) begin(*stream) {}

// The lines gemini writes, as far as fak reads them (notes §3.2).
type (
	geminiLine struct {
		SessionID  string          `json:"session_id"`
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		Delta      bool            `json:"delta"`
		ToolName   string          `json:"tool_name"`
		ToolID     string          `json:"tool_id"`
		Parameters json.RawMessage `json:"parameters"`
		Status     string          `json:"status"`
		Output     json.RawMessage `json:"output"`
		Error      *geminiError    `json:"error"`
		Severity   string          `json:"severity"`
		Message    string          `json:"message"`
		Stats      json.RawMessage `json:"stats"`
	}
	geminiError struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	geminiStats struct {
		InputTokens  uint64 `json:"input_tokens"`
		OutputTokens uint64 `json:"output_tokens"`
		ToolCalls    uint64 `json:"tool_calls"`
	}
)

func (g *geminiTurn) line(s *stream, typ string, line []byte) error {
	var l geminiLine
	if err := decode(line, typ, &l); err != nil {
		return s.fail("%v", err)
	}
	switch typ {
	case "init":
		s.bind(l.SessionID)
	case "message":
		// The user's message is the prompt echoed back; the assistant's
		// comes in deltas.
		if l.Role == "assistant" {
			return s.text(jsonString(l.Content), !l.Delta)
		}
	case "tool_use":
		return s.toolCall(l.ToolID, l.ToolName, l.Parameters, nil)
	case "tool_result":
		out := jsonString(l.Output)
		failed := l.Status == "error"
		x := map[string]any{"status": l.Status, "output": runner.Truncate(out, toolDataBytes)}
		if l.Error != nil {
			x["error"] = l.Error
			if out == "" {
				out = l.Error.Message
			}
		}
		return s.toolResult(l.ToolID, out, failed, x)
	case "error":
		// Non-fatal by the notes (a loop detected, max turns); an error
		// one is what a failed result that says nothing else failed of.
		if l.Severity == "error" {
			s.failure = "gemini: " + orDefault(l.Message, "error")
		}
		s.rt.o.Logger.Warn("gemini reported an error", "session", s.rt.ep.SessionID, "severity", l.Severity, "message", l.Message)
	case "result":
		return g.result(s, l)
	default:
		s.rt.o.Logger.Debug("ignored a line of an unknown type", "provider", ProviderGemini, "type", typ)
	}
	return nil
}

// result ends the turn; gemini reports tokens but no cost (notes §3.2).
func (g *geminiTurn) result(s *stream, l geminiLine) error {
	var st geminiStats
	if len(l.Stats) > 0 && string(l.Stats) != "null" {
		if err := json.Unmarshal(l.Stats, &st); err != nil {
			return s.fail("result: stats: %v", err)
		}
	}
	facts := map[string]any{}
	if stats, _ := rawJSON(l.Stats); string(stats) != "null" {
		facts["stats"] = stats
	}
	end := &ending{facts: facts, usage: &fsmpb.Budget{
		InputTokens:  st.InputTokens,
		OutputTokens: st.OutputTokens,
		Queries:      furtherQueries(1), // stream-json reports no count of model calls
		ToolCalls:    st.ToolCalls,
	}}
	switch {
	case l.Status == "success":
	case l.Error != nil && l.Error.Message != "":
		end.failure = "gemini: " + l.Error.Message
		if l.Error.Type != "" {
			end.failure = "gemini: " + l.Error.Type + ": " + l.Error.Message
		}
	case s.failure != "":
		end.failure = s.failure
	default:
		end.failure = "gemini: the turn ended with status " + orDefault(l.Status, "(none)")
	}
	s.end = end
	return nil
}
