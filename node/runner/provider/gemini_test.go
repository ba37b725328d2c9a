package provider

import (
	"slices"
	"strings"
	"testing"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/node/runner/proc/proctest"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

// The prompt is one --prompt= argument (a leading dash stays text),
// stdin is empty, the workspace trusted.
func TestGeminiCommandLine(t *testing.T) {
	f := newFixture(t)
	rt, _ := f.start(Options{Kind: ProviderGemini, Model: "gemini-2.5-pro", Policy: "auto_edit"}, history(1, "--yolo"), nil)
	tr := &runnertest.Turn{Input: 1}
	mustTurn(t, rt, inputEvent(1, "--yolo"), tr)
	r := f.last()
	want := []string{"-o", "stream-json", "--approval-mode", "auto_edit", "--model", "gemini-2.5-pro", "--prompt=--yolo"}
	if !slices.Equal(r.argv, want) {
		t.Fatalf("argv %q, want %q", r.argv, want)
	}
	if r.line("stdin ") != "[]" || r.env["GEMINI_CLI_TRUST_WORKSPACE"] != "true" {
		t.Fatalf("stdin %q, env %v", r.line("stdin "), r.env)
	}
	// Deltas join; the prompt's echo and a warning are not output.
	if tr.Output() != "Hello new 5a4b3c2d-1e0f-4a1b-9c8d-7e6f5a4b3c2d: --yolo" {
		t.Fatalf("output %q", tr.Output())
	}
	mustTurn(t, rt, inputEvent(3, "more"), &runnertest.Turn{Input: 3})
	want = []string{"-o", "stream-json", "--approval-mode", "auto_edit", "--model", "gemini-2.5-pro",
		"--resume", "5a4b3c2d-1e0f-4a1b-9c8d-7e6f5a4b3c2d", "--prompt=more"}
	if r := f.last(); !slices.Equal(r.argv, want) {
		t.Fatalf("resume argv %q, want %q", r.argv, want)
	}
}

// Tool uses and results are journaled; text after a tool is set apart.
func TestGeminiTools(t *testing.T) {
	f := newFixture(t)
	rt, _ := f.start(Options{Kind: ProviderGemini}, history(1, "use-tool"), nil)
	tr := &runnertest.Turn{Input: 1}
	res := mustTurn(t, rt, inputEvent(1, "use-tool"), tr)
	wantKinds(t, tr, fsm.KindOutput, fsm.KindToolCall, fsm.KindToolResult, fsm.KindToolCall, fsm.KindToolResult, fsm.KindOutput)
	calls, results := eventsOf(tr, fsm.KindToolCall), eventsOf(tr, fsm.KindToolResult)
	if calls[0].Text != "run_shell_command: ls" || data(t, calls[0])["id"] != "tool-1" {
		t.Fatalf("tool.call %q %s", calls[0].Text, calls[0].Data)
	}
	if results[0].Text != "file-a\nfile-b" || data(t, results[0])["is_error"] != false {
		t.Fatalf("tool.result %q %s", results[0].Text, results[0].Data)
	}
	if results[1].Text != "Tool execution denied by policy." || data(t, results[1])["is_error"] != true {
		t.Fatalf("denied tool.result %q %s", results[1].Text, results[1].Data)
	}
	if tr.Output() != "Let me look.\n\nTwo files." {
		t.Fatalf("output %q", tr.Output())
	}
	if res.Usage.GetToolCalls() != 2 {
		t.Fatalf("usage %v", res.Usage)
	}
}

// A prompt past the kernel's bound on one argument is refused before
// gemini runs.
func TestGeminiPromptTooLarge(t *testing.T) {
	f := newFixture(t)
	big := strings.Repeat("x", maxArgBytes)
	rt, _ := f.start(Options{Kind: ProviderGemini}, history(1, big), nil)
	_, err := proctest.RunTurn(t, rt, inputEvent(1, big), &runnertest.Turn{Input: 1})
	proctest.WantReason(t, err, ReasonPromptTooLarge)
}
