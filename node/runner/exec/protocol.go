package exec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/proc"
)

// The lines of fak runtime protocol v1 (docs/runtime-protocol.md).

// protocolVersion is the version a turn line announces.
const protocolVersion = 1

// Bounds on what a process writes: one line, one id or tool name.
const (
	maxLineBytes = 1 << 20
	maxIDBytes   = 256
)

// turnLine is fak's first line to the process.
type turnLine struct {
	Type      string         `json:"type"` // "turn"
	Protocol  int            `json:"protocol"`
	SessionID string         `json:"session_id"`
	Epoch     uint64         `json:"epoch"`
	Input     turnInput      `json:"input"`
	Context   []contextEvent `json:"context"`
}

type turnInput struct {
	Seq  uint64 `json:"seq"`
	Text string `json:"text"`
}

// approvalAnswer is fak's answer to an approval.request.
type approvalAnswer struct {
	Type     string `json:"type"` // "approval.answer"
	ID       string `json:"id"`
	Approved bool   `json:"approved"`
}

// encodeLine marshals v as one line: JSON escapes every newline inside
// strings, and the encoder ends the line.
func encodeLine(v any) ([]byte, error) { return proc.EncodeLine(v) }

// The lines a process writes, decoded and checked.
type (
	outputLine   struct{ text string }
	toolCallLine struct {
		id, name string
		input    json.RawMessage // a compact JSON object
	}
	toolResultLine struct {
		id, output string
		isError    bool
	}
	approvalRequestLine struct{ id, text string }
	usageLine           struct {
		inputTokens, outputTokens, spendMicros, toolCalls, queries uint64
	}
	doneLine struct{ summary string }
)

// decodeLine decodes one line of a process: one of the line types above,
// or an error. Unknown fields are ignored, so a process may carry more
// than v1 asks; an unknown type is an error.
func decodeLine(line []byte) (any, error) {
	msg, err := decodeFields(line)
	if err != nil {
		return nil, err
	}
	return msg, nil
}

func decodeFields(line []byte) (any, error) {
	var f fields
	if err := json.Unmarshal(line, &f); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, errors.New("not a JSON object")
		}
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if f == nil {
		return nil, errors.New("not a JSON object")
	}
	typ, err := f.str("", "type", required)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "output":
		text, err := f.str(typ, "text", required)
		return outputLine{text: text}, err
	case "tool.call":
		id, err := f.id(typ)
		if err != nil {
			return nil, err
		}
		name, err := f.str(typ, "name", nonEmpty)
		if err != nil {
			return nil, err
		}
		if len(name) > maxIDBytes {
			return nil, fmt.Errorf("tool.call: \"name\" is %d bytes; the limit is %d", len(name), maxIDBytes)
		}
		input, err := f.object(typ, "input")
		return toolCallLine{id: id, name: name, input: input}, err
	case "tool.result":
		id, err := f.id(typ)
		if err != nil {
			return nil, err
		}
		output, err := f.str(typ, "output", required)
		if err != nil {
			return nil, err
		}
		isError, err := f.flag(typ, "is_error")
		return toolResultLine{id: id, output: output, isError: isError}, err
	case "approval.request":
		id, err := f.id(typ)
		if err != nil {
			return nil, err
		}
		text, err := f.str(typ, "text", nonEmpty)
		return approvalRequestLine{id: id, text: text}, err
	case "usage":
		var u usageLine
		for _, c := range []struct {
			name string
			to   *uint64
		}{
			{"input_tokens", &u.inputTokens}, {"output_tokens", &u.outputTokens},
			{"spend_micros", &u.spendMicros}, {"tool_calls", &u.toolCalls}, {"queries", &u.queries},
		} {
			if *c.to, err = f.count(typ, c.name); err != nil {
				return nil, err
			}
		}
		return u, nil
	case "done":
		summary, err := f.str(typ, "summary", optional)
		return doneLine{summary: summary}, err
	default:
		return nil, fmt.Errorf("unknown type %q (v1 has output, tool.call, tool.result, approval.request, usage, done)", runner.Truncate(typ, 64))
	}
}

// fields are a line's members, undecoded. A null member counts as absent.
type fields map[string]json.RawMessage

type presence int

const (
	optional presence = iota
	required          // present, possibly ""
	nonEmpty          // present and not ""
)

func (f fields) raw(name string) (json.RawMessage, bool) {
	v, ok := f[name]
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

func where(typ, name string) string {
	if typ == "" {
		return fmt.Sprintf("%q", name)
	}
	return fmt.Sprintf("%s: %q", typ, name)
}

func (f fields) str(typ, name string, p presence) (string, error) {
	v, ok := f.raw(name)
	if !ok {
		if p == optional {
			return "", nil
		}
		return "", fmt.Errorf("%s is missing", where(typ, name))
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("%s must be a string", where(typ, name))
	}
	if s == "" && p == nonEmpty {
		return "", fmt.Errorf("%s is empty", where(typ, name))
	}
	return s, nil
}

// id is the line's "id": a string naming a tool call or an approval.
func (f fields) id(typ string) (string, error) {
	id, err := f.str(typ, "id", nonEmpty)
	if err == nil && len(id) > maxIDBytes {
		err = fmt.Errorf("%s is %d bytes; the limit is %d", where(typ, "id"), len(id), maxIDBytes)
	}
	return id, err
}

func (f fields) flag(typ, name string) (bool, error) {
	v, ok := f.raw(name)
	if !ok {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return false, fmt.Errorf("%s must be true or false", where(typ, name))
	}
	return b, nil
}

func (f fields) count(typ, name string) (uint64, error) {
	v, ok := f.raw(name)
	if !ok {
		return 0, nil
	}
	var n uint64
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, fmt.Errorf("%s must be a non-negative integer", where(typ, name))
	}
	return n, nil
}

// object returns the member as a compact JSON object; absent is {}.
func (f fields) object(typ, name string) (json.RawMessage, error) {
	v, ok := f.raw(name)
	if !ok {
		return json.RawMessage("{}"), nil
	}
	if v = bytes.TrimSpace(v); len(v) == 0 || v[0] != '{' {
		return nil, fmt.Errorf("%s must be a JSON object", where(typ, name))
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return nil, fmt.Errorf("%s: %v", where(typ, name), err)
	}
	return b.Bytes(), nil
}
