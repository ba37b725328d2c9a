package provider

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner/proc/proctest"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

// The exec flags come before resume; the prompt goes to stdin.
func TestCodexCommandLine(t *testing.T) {
	f := newFixture(t)
	rt, _ := f.start(Options{Kind: ProviderCodex, Model: "gpt-5.4", Policy: "workspace-write"}, history(1, "-hi"), nil)
	mustTurn(t, rt, inputEvent(1, "-hi"), &runnertest.Turn{Input: 1})
	flags := []string{"exec", "--json", "--model", "gpt-5.4", "--sandbox", "workspace-write", "--skip-git-repo-check"}
	r := f.last()
	if want := append(slices.Clone(flags), "-"); !slices.Equal(r.argv, want) {
		t.Fatalf("argv %q, want %q", r.argv, want)
	}
	if r.line("prompt ") != "-hi" {
		t.Fatalf("prompt on stdin %q", r.line("prompt "))
	}
	mustTurn(t, rt, inputEvent(3, "more"), &runnertest.Turn{Input: 3})
	want := append(slices.Clone(flags), "resume", "0199a213-81c0-7800-8aa1-bbab2a035a53", "-")
	if r := f.last(); !slices.Equal(r.argv, want) {
		t.Fatalf("resume argv %q, want %q", r.argv, want)
	}
}

// Commands, file changes and MCP calls are tool calls with results;
// reasoning, todo lists and error items are not journaled.
func TestCodexItems(t *testing.T) {
	f := newFixture(t)
	rt, _ := f.start(Options{Kind: ProviderCodex}, history(1, "use-tool"), nil)
	tr := &runnertest.Turn{Input: 1}
	res := mustTurn(t, rt, inputEvent(1, "use-tool"), tr)
	wantKinds(t, tr, fsm.KindToolCall, fsm.KindToolResult, fsm.KindToolCall, fsm.KindToolResult,
		fsm.KindToolCall, fsm.KindToolResult, fsm.KindOutput)
	calls, results := eventsOf(tr, fsm.KindToolCall), eventsOf(tr, fsm.KindToolResult)
	if calls[0].Text != "command_execution: bash -lc ls" || calls[1].Text != `file_change: {"changes":[{"path":"notes.txt","kind":"add"}]}` ||
		calls[2].Text != `docs.search: {"arguments":{"q":"x"},"server":"docs","tool":"search"}` {
		t.Fatalf("tool.call texts %q, %q, %q", calls[0].Text, calls[1].Text, calls[2].Text)
	}
	if d := data(t, results[0]); d["tool_use_id"] != "item_1" || d["output"] != "file-a\nfile-b\n" || d["exit_code"] != 0.0 ||
		d["status"] != "completed" || d["is_error"] != false {
		t.Fatalf("command result %v", d)
	}
	if results[1].Text != "add notes.txt" || results[2].Text != `{"content":[{"type":"text","text":"found"}],"structured_content":null}` {
		t.Fatalf("results %q, %q", results[1].Text, results[2].Text)
	}
	if tr.Output() != "Listed and noted." {
		t.Fatalf("output %q", tr.Output())
	}
	want := &fsmpb.Budget{InputTokens: 24763, OutputTokens: 122, ToolCalls: 2}
	if !proto.Equal(res.Usage, want) {
		t.Fatalf("usage %v, want %v", res.Usage, want)
	}
}

// A top-level error with no turn.completed after it fails the turn with
// its message.
func TestCodexFatalError(t *testing.T) {
	f := newFixture(t)
	rt, _ := f.start(Options{Kind: ProviderCodex}, history(1, "fatal-error"), nil)
	_, err := proctest.RunTurn(t, rt, inputEvent(1, "fatal-error"), &runnertest.Turn{Input: 1})
	proctest.WantReason(t, err, ReasonProviderError, "codex: model gpt-x does not exist")
}
