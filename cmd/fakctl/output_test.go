package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

func TestWriteTable(t *testing.T) {
	var out bytes.Buffer
	err := writeTable(&out, []string{"ID", "TITLE", "STATE"}, [][]string{
		{"s-1", "short", "active"},
		{"s-1000", "a much longer title", "stopped"},
		{"s-2", "", "active"},
		{"s-3", "two\nlines\tand a tab", "active"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"ID       TITLE                  STATE",
		"s-1      short                  active",
		"s-1000   a much longer title    stopped",
		"s-2      -                      active",
		`s-3      two\nlines and a tab   active`,
		"",
	}, "\n")
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestWriteFields(t *testing.T) {
	var out bytes.Buffer
	if err := writeFields(&out, [][2]string{{"ID", "s-1"}, {"Stop reason", "done"}, {"Objective", ""}}); err != nil {
		t.Fatal(err)
	}
	want := "ID:          s-1\nStop reason: done\nObjective:   -\n"
	if out.String() != want {
		t.Errorf("fields:\n%q\nwant:\n%q", out.String(), want)
	}
}

func TestStatusTableShowsErrorsOnlyWhenPresent(t *testing.T) {
	healthy := &fakv1.NodeStatus{
		Name: "n1", RaftState: "Leader", Term: 3, LastLogIndex: 10, CommitIndex: 9, AppliedIndex: 8, LeaderId: "n1",
	}
	header, rows := statusTable([]*fakv1.NodeStatus{healthy})
	if len(header) != 7 || strings.Join(rows[0], " ") != "n1 Leader 3 10 9 8 n1" {
		t.Errorf("healthy: header %v rows %v", header, rows)
	}

	down := &fakv1.NodeStatus{ApiAddr: "10.0.0.3:7401", Error: "connection refused"}
	header, rows = statusTable([]*fakv1.NodeStatus{healthy, down})
	if header[len(header)-1] != "ERROR" {
		t.Errorf("header %v: want an ERROR column", header)
	}
	if got := rows[1]; got[0] != "10.0.0.3:7401" || got[1] != "" || got[7] != "connection refused" {
		t.Errorf("unreachable row = %q", got)
	}
	if rows[0][7] != "" {
		t.Errorf("healthy row error = %q", rows[0][7])
	}
}

func TestJSONOutputIsStable(t *testing.T) {
	session := &fakv1.Session{SessionId: "s-1", Title: "t", HeadSeq: 7, State: fakv1.SessionState_SESSION_STATE_ACTIVE}
	var out bytes.Buffer
	if err := printMessage(&out, session); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"sessionId\": \"s-1\",\n  \"title\": \"t\",\n  \"state\": \"SESSION_STATE_ACTIVE\",\n  \"headSeq\": \"7\"\n}\n"
	if out.String() != want {
		t.Errorf("printMessage:\n%s\nwant:\n%s", out.String(), want)
	}

	out.Reset()
	if err := printMessageList(&out, []*fakv1.Session{}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "[]\n" {
		t.Errorf("empty list = %q", out.String())
	}

	out.Reset()
	if err := printMessageLine(&out, &fakv1.Event{Seq: 2, Text: "a\nb"}); err != nil {
		t.Fatal(err)
	}
	if want := `{"seq":"2","text":"a\nb"}` + "\n"; out.String() != want {
		t.Errorf("printMessageLine = %q, want %q", out.String(), want)
	}
}

func TestFormatters(t *testing.T) {
	if got := formatSessionState(fakv1.SessionState_SESSION_STATE_STOPPED); got != "stopped" {
		t.Errorf("state = %q", got)
	}
	if got := formatTime(0); got != "" {
		t.Errorf("zero time = %q", got)
	}
	ts := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if got := formatTime(ts.UnixNano()); got != ts.Local().Format(time.RFC3339) {
		t.Errorf("time = %q", got)
	}
}

// compactJSON must agree with json.Compact on whatever protojson writes,
// whitespace inside strings and escaped quotes included.
func TestCompactJSON_MatchesJSONCompact(t *testing.T) {
	for _, in := range []string{
		`{}`,
		`{"a": 1, "b": [1, 2, {"c": "x y"}]}`,
		"{\n  \"text\": \"a \\\" quoted \\\\ \\\"  space\",\n  \"n\": -1.5e3\n}",
		`{"s": "tab\there", "u": "\u00e9 \n", "e": ""}`,
		`[ "\\", " ", "\\\"" ]`,
	} {
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(in)); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if got := compactJSON([]byte(in)); string(got) != want.String() {
			t.Errorf("compactJSON(%q) = %q, want %q", in, got, want.String())
		}
	}
}
