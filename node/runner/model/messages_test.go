package model

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// render is the messages as compact "role:content[calls]" lines.
func render(t *testing.T, system string, evs []*fsmpb.Event) string {
	t.Helper()
	msgs, err := Messages(system, evs)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Role       string `json:"role"`
			Content    string `json:"content"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		line := v.Role + ":" + v.Content
		for _, c := range v.ToolCalls {
			line += "[" + c.ID + "]"
		}
		if v.ToolCallID != "" {
			line = v.Role + "(" + v.ToolCallID + "):" + v.Content
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

func call(j *journal, id string) {
	j.add(fsm.KindToolCall, "shell {}", callData{ID: id, Name: ToolShell, Arguments: "{}", Step: 1})
}

func result(j *journal, id, text string) {
	j.add(fsm.KindToolResult, text, resultData{ID: id, Name: ToolShell, OK: true})
}

func TestMessagesRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(j *journal)
		want  string
	}{{
		name: "outputs of a step make one message; approvals and turn events are not sent",
		build: func(j *journal) {
			j.input("q")
			j.add(fsm.KindOutput, "a ", nil)
			j.add(fsm.KindOutput, "b", nil)
			call(j, "c1")
			call(j, "c2")
			j.add(fsm.KindApprovalRequested, "allow?", nil)
			j.add(fsm.KindApprovalAnswered, "yes", nil)
			result(j, "c1", "r1")
			j.add(fsm.KindApprovalRequested, "allow?", nil)
			result(j, "c2", "r2")
			j.add(fsm.KindOutput, "done", nil)
			j.add(fsm.KindTurnCompleted, "completed", nil)
			j.add(fsm.KindNote, "note", nil)
			j.add(fsm.KindBudgetCharged, "", nil)
		},
		want: "system:S\nuser:q\nassistant:a b[c1][c2]\ntool(c1):r1\ntool(c2):r2\nassistant:done",
	}, {
		name: "inputs are sent where their turns start, queued ones not at all",
		build: func(j *journal) {
			a := j.add(fsm.KindInput, "first", nil)
			b := j.add(fsm.KindInput, "second", nil)
			j.add(fsm.KindTurnStarted, "", startedData{InputSeq: a.Seq})
			j.add(fsm.KindOutput, "reply one", nil)
			j.add(fsm.KindInput, "third, still queued", nil)
			j.add(fsm.KindTurnCompleted, "", nil)
			j.add(fsm.KindTurnStarted, "", startedData{InputSeq: b.Seq})
		},
		want: "system:S\nuser:first\nassistant:reply one\nuser:second",
	}, {
		name: "the last event, an input no turn has started on, is the input served",
		build: func(j *journal) {
			j.input("one")
			j.add(fsm.KindOutput, "r", nil)
			j.add(fsm.KindTurnCompleted, "", nil)
			j.add(fsm.KindInput, "two", nil)
		},
		want: "system:S\nuser:one\nassistant:r\nuser:two",
	}, {
		name: "calls left without results by an interrupted turn are answered",
		build: func(j *journal) {
			j.input("q")
			call(j, "c1")
			call(j, "c2")
			result(j, "c1", "r1")
			j.add(fsm.KindTurnCompleted, "interrupted", nil)
			j.input("next")
		},
		want: "system:S\nuser:q\nassistant:[c1][c2]\ntool(c1):r1\ntool(c2):" + NoResult + "\nuser:next",
	}, {
		name: "a turn cut off with no turn.completed ends at the next turn",
		build: func(j *journal) {
			j.input("q")
			j.add(fsm.KindOutput, "partial", nil)
			call(j, "c1")
			j.input("next")
		},
		want: "system:S\nuser:q\nassistant:partial[c1]\ntool(c1):" + NoResult + "\nuser:next",
	}, {
		name: "a result answering no call is not sent",
		build: func(j *journal) {
			j.input("q")
			result(j, "ghost", "boo")
			j.add(fsm.KindOutput, "r", nil)
		},
		want: "system:S\nuser:q\nassistant:r",
	}, {
		name: "events up to the last reset boundary are skipped",
		build: func(j *journal) {
			j.input("old")
			j.add(fsm.KindOutput, "old reply", nil)
			j.add(fsm.KindTurnCompleted, "", nil)
			j.add(fsm.KindResetBoundary, "", nil)
			j.input("new")
		},
		want: "system:S\nuser:new",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			j := &journal{}
			tc.build(j)
			if got := render(t, "S", j.evs); got != tc.want {
				t.Fatalf("messages\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestMessagesRefusesAnInputOutsideTheContext(t *testing.T) {
	evs := []*fsmpb.Event{{Seq: 9, Kind: fsm.KindTurnStarted, Data: []byte(`{"input_seq":3}`)}}
	if _, err := Messages("", evs); err == nil || !strings.Contains(err.Error(), "input 3, which is not in the context") {
		t.Fatalf("error %v", err)
	}
}

// The body depends on the set of tools, not the order they are listed in,
// and is the same every time.
func TestRequestBodyIsDeterministic(t *testing.T) {
	j := &journal{}
	j.input("hi")
	a := Options{Model: "m", Tools: []string{ToolListFiles, ToolShell, ToolReadFile}}
	b := Options{Model: "m", Tools: []string{ToolReadFile, ToolShell, ToolListFiles}}
	first, err := RequestBody(a, "", j.evs)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		again, err := RequestBody(b, "", j.evs)
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(first) {
			t.Fatalf("bodies differ:\n%s\n%s", first, again)
		}
	}
	var v struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
		Tools  []struct {
			Function struct{ Name string } `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(first, &v); err != nil {
		t.Fatal(err)
	}
	if v.Model != "m" || !v.Stream || len(v.Tools) != 3 || v.Tools[0].Function.Name != ToolShell || v.Tools[2].Function.Name != ToolListFiles {
		t.Fatalf("body %s", first)
	}
}
