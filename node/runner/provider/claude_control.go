package provider

import (
	"encoding/json"
	"strings"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/node/runner"
)

// claude's control protocol (notes §1.3): the CLI asks, on stdout, and fak
// answers on stdin. fak asks nothing but initialize (claude.go); claude
// asks can_use_tool for each permission prompt under
// --permission-prompt-tool stdio.
type (
	claudeRequestLine struct {
		RequestID string `json:"request_id"`
		Request   struct {
			Subtype        string          `json:"subtype"`
			ToolName       string          `json:"tool_name"`
			Input          json.RawMessage `json:"input"`
			ToolUseID      string          `json:"tool_use_id"`
			Title          json.RawMessage `json:"title"`
			Description    json.RawMessage `json:"description"`
			DecisionReason json.RawMessage `json:"decision_reason"`
			BlockedPath    json.RawMessage `json:"blocked_path"`
		} `json:"request"`
	}
	claudeControlResponse struct {
		Type     string `json:"type"` // "control_response"
		Response struct {
			Subtype   string `json:"subtype"` // "success" or "error"
			RequestID string `json:"request_id"`
			Response  any    `json:"response,omitempty"`
			Error     string `json:"error,omitempty"`
		} `json:"response"`
	}
	claudeAllow struct {
		Behavior     string          `json:"behavior"` // "allow"
		UpdatedInput json.RawMessage `json:"updatedInput"`
	}
	claudeDeny struct {
		Behavior string `json:"behavior"` // "deny"
		Message  string `json:"message"`
	}
)

// control answers the CLI's control requests: a permission prompt goes to
// fak's clients; fak offers nothing else.
func (c *claudeTurn) control(s *stream, line []byte) error {
	var r claudeRequestLine
	if err := decode(line, "control_request", &r); err != nil {
		return s.fail("%v", err)
	}
	if r.RequestID == "" {
		return s.fail("control_request: no request_id to answer")
	}
	if r.Request.Subtype != "can_use_tool" {
		var resp claudeControlResponse
		resp.Type, resp.Response.Subtype, resp.Response.RequestID = "control_response", "error", r.RequestID
		resp.Response.Error = "not supported by fak"
		s.pr.Send(encodeLine(resp))
		return nil
	}
	return c.permission(s, r)
}

// permission journals a permission prompt as approval.requested, waits
// for the answer and hands it to the CLI. The FSM holds one pending
// approval, cleared by the next tool.result: a prompt arriving while an
// approved tool has not returned yet (claude running tools in parallel)
// is denied at once, with a message asking the model to try again.
func (c *claudeTurn) permission(s *stream, r claudeRequestLine) error {
	req := r.Request
	input := req.Input
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage("{}")
	}
	if s.approval {
		s.rt.o.Logger.Info("denied a permission prompt while another approval waits for its tool's result",
			"session", s.rt.ep.SessionID, "tool", req.ToolName, "tool_use_id", req.ToolUseID)
		c.answer(s, r.RequestID, claudeDeny{Behavior: "deny",
			Message: "fak asks people to approve one tool call at a time and another approved call has not returned yet; run this call again on its own"})
		return nil
	}
	in, cut := rawJSON(input)
	data := map[string]any{"tool_name": req.ToolName, "input": in, "tool_use_id": req.ToolUseID}
	if cut {
		data["input_truncated"] = true
	}
	for k, v := range map[string]json.RawMessage{"title": req.Title, "description": req.Description,
		"decision_reason": req.DecisionReason, "blocked_path": req.BlockedPath} {
		if str := jsonString(v); str != "" {
			data[k] = runner.Truncate(str, summaryBytes)
		}
	}
	text := req.ToolName
	if sum := inputSummary(input); sum != "" {
		text += ": " + sum
	}
	seq, err := s.emit(runner.Event{Kind: fsm.KindApprovalRequested, Text: runner.Truncate(text, summaryBytes), Data: marshal(data)})
	if err != nil {
		return err
	}
	approved, err := s.t.AwaitApproval(s.tctx, seq)
	if err != nil {
		return err
	}
	if approved {
		c.answer(s, r.RequestID, claudeAllow{Behavior: "allow", UpdatedInput: input})
	} else {
		c.answer(s, r.RequestID, claudeDeny{Behavior: "deny", Message: s.rt.deniedBy(seq)})
	}
	return nil
}

// answer writes a successful control_response carrying verdict.
func (c *claudeTurn) answer(s *stream, requestID string, verdict any) {
	var resp claudeControlResponse
	resp.Type, resp.Response.Subtype, resp.Response.RequestID = "control_response", "success", requestID
	resp.Response.Response = verdict
	s.pr.Send(encodeLine(resp))
}

// deniedBy tells the agent who denied the approval at seq, as the
// journal's approval.answered says it ("denied by cli alice: not in
// prod"), so the model can say so.
func (rt *runtime) deniedBy(seq uint64) string {
	evs, err := rt.journal.Events(seq+1, 64)
	if err == nil {
		for _, ev := range evs {
			var f struct {
				ApprovalSeq uint64 `json:"approval_seq"`
				Note        string `json:"note"`
			}
			if ev.Kind != fsm.KindApprovalAnswered || json.Unmarshal(ev.Data, &f) != nil || f.ApprovalSeq != seq {
				continue
			}
			msg := strings.TrimSpace(ev.Text)
			if f.Note != "" {
				msg += ": " + f.Note
			}
			return msg
		}
	}
	return "denied by a person through fak"
}
