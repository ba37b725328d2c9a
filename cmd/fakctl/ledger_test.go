package main

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/client/journal"
)

func TestParseAndFormatSpend(t *testing.T) {
	for in, want := range map[string]uint64{
		"0": 0, "5": 5_000_000, "0.95": 950_000, "12.50": 12_500_000, ".5": 500_000, "3.": 3_000_000,
		"0.000001": 1, " 7.25 ": 7_250_000, "18446744073709.551615": 18446744073709551615,
	} {
		got, err := parseSpend(in)
		if err != nil || got != want {
			t.Errorf("parseSpend(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", ".", "-1", "+1", "1e3", "1.0000001", "abc", "1,5", "18446744073709.551616", "99999999999999999999"} {
		if got, err := parseSpend(in); err == nil {
			t.Errorf("parseSpend(%q) = %d, want an error", in, got)
		}
	}
	for micros, want := range map[uint64]string{0: "0", 1: "0.000001", 950_000: "0.95", 3_000_000: "3", 12_345_678: "12.345678"} {
		if got := journal.FormatSpend(micros); got != want {
			t.Errorf("FormatSpend(%d) = %q, want %q", micros, got, want)
		}
		if back, err := parseSpend(want); err != nil || back != micros {
			t.Errorf("parseSpend(%q) = %d, %v; want %d", want, back, err, micros)
		}
	}
}

func TestSessionCreatePolicy(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newFakeFleet()
	url := fleet.start(t)

	code, _, errOut := runCLI(t, url, "session", "create", "--title", "budgeted",
		"--max-turns", "10", "--max-output-tokens", "5000", "--max-queries", "20", "--max-spend", "2.50",
		"--max-tool-calls", "7", "--context-cap", "100000", "--priority", "high", "--pace", "steady", "--qa-envelope", "strict")
	if code != exitOK {
		t.Fatalf("create: code %d stderr %q", code, errOut)
	}
	want := &fakv1.Policy{
		Limits:     &fakv1.Budget{Turns: 10, OutputTokens: 5000, Queries: 20, SpendMicros: 2_500_000, ToolCalls: 7},
		ContextCap: 100000, Priority: "high", Pace: "steady", QaEnvelope: "strict",
	}
	if got := fleet.lastCreate.GetPolicy(); !proto.Equal(got, want) {
		t.Errorf("policy sent = %v, want %v", got, want)
	}
	// No policy flag: no policy, so the node's defaults apply.
	if code, _, errOut := runCLI(t, url, "session", "create", "--title", "plain"); code != exitOK || fleet.lastCreate.GetPolicy() != nil {
		t.Errorf("create without policy flags: code %d stderr %q, policy %v", code, errOut, fleet.lastCreate.GetPolicy())
	}
	code, _, errOut = runCLI(t, url, "session", "create", "--title", "x", "--max-spend", "1.2345678")
	if code != exitUsage || !strings.Contains(errOut, `invalid value "1.2345678" for flag -max-spend: "1.2345678" has more than 6 decimals`) {
		t.Errorf("bad --max-spend: code %d stderr %q", code, errOut)
	}
}

func TestBoundaryFields(t *testing.T) {
	var out strings.Builder
	child := &fakv1.Session{SessionId: "ses_c", State: fakv1.SessionState_SESSION_STATE_ACTIVE, Epoch: 1, HeadSeq: 3,
		ProviderSessionId: "fak_r1", ParentSession: "ses_p", BoundarySource: "clear", ContextCap: 1000}
	if err := writeFields(&out, boundaryFields(&fakv1.Boundary{Action: "clear", Session: child, PreviousSessionId: "ses_p"})); err != nil {
		t.Fatal(err)
	}
	want := `Action:           clear
Session:          ses_c (the new session, now in force)
Previous session: ses_p
State:            active
Epoch:            1
Head:             3 (address ses_c@3)
Provider session: fak_r1
Lineage:          clear of ses_p
Context:          0 of 1000 tokens used (1000 left)
`
	if out.String() != want {
		t.Errorf("clear:\n%s\nwant:\n%s", out.String(), want)
	}

	out.Reset()
	same := &fakv1.Session{SessionId: "ses_p", State: fakv1.SessionState_SESSION_STATE_ACTIVE, Epoch: 3, HeadSeq: 9, ProviderSessionId: "fak_r2"}
	writeFields(&out, boundaryFields(&fakv1.Boundary{Action: "fresh", Session: same, Pruned: 0}))
	for _, line := range []string{"Action:           fresh\n", "Session:          ses_p (same session)\n", "Pruned:           0 cached provider entries (0 is normal)\n", "Lineage:          root (no parent)\n"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("fresh lacks %q:\n%s", line, out.String())
		}
	}
	if strings.Contains(out.String(), "Previous session") {
		t.Errorf("fresh names a previous session:\n%s", out.String())
	}
}

func TestWriteLineage(t *testing.T) {
	node := func(id, title, parent, source string, at uint64, created int64, stop string, children ...string) *fakv1.LineageNode {
		state := fakv1.SessionState_SESSION_STATE_ACTIVE
		if stop != "" {
			state = fakv1.SessionState_SESSION_STATE_STOPPED
		}
		return &fakv1.LineageNode{
			Session:       &fakv1.Session{SessionId: id, Title: title, State: state, StopReason: stop, HeadSeq: uint64(created), CreatedUnixNano: created},
			ParentSession: parent, Source: source, ForkAddress: at, Children: children,
		}
	}
	l := &fakv1.GetLineageResponse{Root: "r", Nodes: []*fakv1.LineageNode{
		// Children are listed in id order by the server; the tree shows them oldest first.
		node("r", "demo", "", "", 0, 1, "USER_CLEAR", "b", "a"),
		node("b", "demo", "r", "fork", 4, 2, "", "d"),
		node("a", "demo", "r", "clear", 0, 3, "USER_NEW", "c"),
		node("d", "demo", "b", "clear", 0, 4, ""),
		node("c", "demo", "a", "new", 0, 5, ""),
	}}
	var out strings.Builder
	if err := writeLineage(&out, l); err != nil {
		t.Fatal(err)
	}
	want := `SESSION   SOURCE   AT   STATE     STOP REASON   HEAD   TITLE
r         -        -    stopped   USER_CLEAR    1      demo
├─ b      fork     4    active    -             2      demo
│  └─ d   clear    -    active    -             4      demo
└─ a      clear    -    stopped   USER_NEW      3      demo
   └─ c   new      -    active    -             5      demo
`
	if out.String() != want {
		t.Errorf("lineage:\n%s\nwant:\n%s", out.String(), want)
	}
}
