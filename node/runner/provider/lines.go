package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/proc"
)

// maxLineBytes bounds one line of a CLI's stdout. A provider's line holds
// a whole message or tool result (a file the agent read, say), so the
// bound is generous; a longer line fails the turn rather than fak's
// memory.
const maxLineBytes = 16 << 20

// lineType checks that line is a JSON object with a string "type", the
// one shape all three CLIs share, and returns the type. What else a line
// holds is the dialect's to read.
func lineType(line []byte) (string, error) {
	if b := bytes.TrimSpace(line); len(b) == 0 || b[0] != '{' {
		return "", fmt.Errorf("not a JSON object: %s", runner.Truncate(string(line), 120))
	}
	var head struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return "", errors.New(`"type" is not a string`)
		}
		return "", fmt.Errorf("not JSON: %v", err)
	}
	if head.Type == nil || *head.Type == "" {
		return "", errors.New(`no "type"`)
	}
	return *head.Type, nil
}

// decode unmarshals a line into a dialect's struct; a field of the wrong
// shape is the CLI's protocol error.
func decode(line []byte, typ string, v any) error {
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("%s: %v", typ, err)
	}
	return nil
}

// encodeLine marshals v as one line: JSON escapes every newline inside
// strings, and the encoder ends the line.
func encodeLine(v any) []byte {
	b, err := proc.EncodeLine(v)
	if err != nil {
		// Only values that cannot fail are encoded: fak's own structs
		// and JSON the CLI sent.
		panic(fmt.Sprintf("provider: encoding %T: %v", v, err))
	}
	return b
}

// marshal is an event's JSON data.
func marshal(v any) []byte { return bytes.TrimSuffix(encodeLine(v), []byte("\n")) }
