package exec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want any
	}{
		{`{"type":"output","text":"hi"}`, outputLine{text: "hi"}},
		{`{"type":"output","text":"","extra":{"v2":true}}`, outputLine{}},
		{`{"type":"tool.call","id":"c1","name":"shell","input":{ "command" : "ls" }}`,
			toolCallLine{id: "c1", name: "shell", input: []byte(`{"command":"ls"}`)}},
		{`{"type":"tool.call","id":"c1","name":"shell"}`, toolCallLine{id: "c1", name: "shell", input: []byte(`{}`)}},
		{`{"type":"tool.call","id":"c1","name":"shell","input":null}`, toolCallLine{id: "c1", name: "shell", input: []byte(`{}`)}},
		{`{"type":"tool.result","id":"c1","output":"x","is_error":true}`, toolResultLine{id: "c1", output: "x", isError: true}},
		{`{"type":"tool.result","id":"c1","output":""}`, toolResultLine{id: "c1"}},
		{`{"type":"approval.request","id":"c1","text":"ok?"}`, approvalRequestLine{id: "c1", text: "ok?"}},
		{`{"type":"usage","input_tokens":1,"output_tokens":2,"spend_micros":3,"tool_calls":4,"queries":5}`,
			usageLine{inputTokens: 1, outputTokens: 2, spendMicros: 3, toolCalls: 4, queries: 5}},
		{`{"type":"usage"}`, usageLine{}},
		{`{"type":"done"}`, doneLine{}},
		{`{"type":"done","summary":"fine"}`, doneLine{summary: "fine"}},
	} {
		got, err := decodeLine([]byte(tc.line))
		if err != nil {
			t.Errorf("%s: %v", tc.line, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %#v, want %#v", tc.line, got, tc.want)
		}
	}
	for line, want := range map[string]string{
		`{"type":"tool.call","id":5,"name":"x"}`:                                  `tool.call: "id" must be a string`,
		`{"type":"tool.call","id":"","name":"x"}`:                                 `tool.call: "id" is empty`,
		`{"type":"tool.call","id":"` + strings.Repeat("i", 300) + `","name":"x"}`: `"id" is 300 bytes`,
		`{"type":"tool.result","id":"a"}`:                                         `tool.result: "output" is missing`,
		`{"type":"tool.result","id":"a","output":"","is_error":"no"}`:             `"is_error" must be true or false`,
		`{"type":"approval.request","id":"a"}`:                                    `approval.request: "text" is missing`,
		`{"type":"done","summary":3}`:                                             `done: "summary" must be a string`,
		`{"type":7}`:                                                              `"type" must be a string`,
		`{"type":"output","text":"x"`:                                             "not JSON",
		`"output"`:                                                                "not a JSON object",
		`{"type":"` + strings.Repeat("z", 100) + `"}`:                             "unknown type",
	} {
		if _, err := decodeLine([]byte(line)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.60s: error %v, want %q", line, err, want)
		}
	}
}

// No line makes the decoder panic; every line decodes to a known line or
// an error.
func FuzzDecodeLine(f *testing.F) {
	for _, s := range []string{`{"type":"output","text":"hi"}`, `{"type":"tool.call","id":"a","name":"b","input":{}}`,
		`{"type":"usage","output_tokens":1e3}`, `[]`, `null`, `{"type":null}`, "\xff", ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		msg, err := decodeLine(b)
		if (msg == nil) == (err == nil) {
			t.Fatalf("decodeLine(%q) = %v, %v", b, msg, err)
		}
	})
}

func TestEncodeLineIsOneLine(t *testing.T) {
	b, err := encodeLine(turnLine{Type: "turn", Protocol: 1, Input: turnInput{Text: "a\nb <&>"},
		Context: []contextEvent{{Seq: 1, Kind: "input", Data: json.RawMessage("{\n\"k\": 1\n}")}}})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(b, []byte("\n")) != 1 || !bytes.HasSuffix(b, []byte("\n")) {
		t.Fatalf("not one line: %q", b)
	}
	if !bytes.Contains(b, []byte(`"a\nb <&>"`)) || !bytes.Contains(b, []byte(`"data":{"k":1}`)) {
		t.Fatalf("line %s", b)
	}
}
