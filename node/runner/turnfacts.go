package runner

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// The turn facts a turn's events carry as JSON data: status, exit code,
// provider thread, usage.

type turnFact struct {
	Status   string `json:"status,omitempty"`
	Reason   string `json:"reason,omitempty"`
	InputSeq uint64 `json:"input_seq"`
	Node     string `json:"node,omitempty"`
	Adapter  string `json:"adapter,omitempty"`
	Error    string `json:"error,omitempty"`
}

// turnData is f as JSON, followed by the runtime's facts (sorted by key;
// the runner's own keys win a clash, a fact that cannot be marshalled is
// left out).
func turnData(f turnFact, facts map[string]any) []byte {
	b, _ := json.Marshal(f)
	if len(facts) == 0 {
		return b
	}
	var own map[string]json.RawMessage
	_ = json.Unmarshal(b, &own)
	out := bytes.NewBuffer(b[:len(b)-1]) // f always has input_seq: never "{}"
	for _, k := range slices.Sorted(maps.Keys(facts)) {
		if _, clash := own[k]; clash {
			continue
		}
		key, _ := json.Marshal(k)
		v, err := json.Marshal(facts[k])
		if err != nil {
			continue
		}
		out.WriteByte(',')
		out.Write(key)
		out.WriteByte(':')
		out.Write(v)
	}
	out.WriteByte('}')
	return out.Bytes()
}
