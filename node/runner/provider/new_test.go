package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

func TestNewRefusesABadRuntimeBlock(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want []string
	}{
		{"kind", Options{Kind: "copilot"}, []string{`unknown kind "copilot"`, `write "claude", "codex" or "gemini"`}},
		{"no kind", Options{}, []string{`unknown kind ""`}},
		{"claude policy", Options{Kind: ProviderClaude, Policy: "yolo"},
			[]string{`unknown policy "yolo"`, `write "ask"`, "acceptEdits", "bypassPermissions"}},
		{"codex ask", Options{Kind: ProviderCodex, Policy: "ask"},
			[]string{"codex exec cannot hand approvals to fak", "read-only, workspace-write, danger-full-access"}},
		{"codex policy", Options{Kind: ProviderCodex, Policy: "full-auto"}, []string{`unknown policy "full-auto"`, "workspace-write"}},
		{"gemini ask", Options{Kind: ProviderGemini, Policy: "ask"},
			[]string{"headless gemini cannot hand approvals to fak", "default, auto_edit, yolo, plan"}},
		{"empty command", Options{Kind: ProviderCodex, Command: []string{""}}, []string{"empty command"}},
		{"model flag", Options{Kind: ProviderCodex, Model: "--yolo"}, []string{"starts with a dash"}},
		{"sandbox", Options{Kind: ProviderGemini, Sandbox: "docker"}, []string{`unknown sandbox "docker"`}},
		{"timeout", Options{Kind: ProviderGemini, TurnTimeout: -1}, []string{"negative turn_timeout"}},
		{"env", Options{Kind: ProviderClaude, Env: []string{"ANTHROPIC_API_KEY"}}, []string{"not KEY=VALUE"}},
		{"env fak", Options{Kind: ProviderClaude, Env: []string{"FAK_TOKEN=x"}}, []string{"FAK_ names are fak's own"}},
		{"gateway url", Options{Kind: ProviderClaude, Gateway: &Gateway{URL: "127.0.0.1:7010", Key: "k"}}, []string{"not an http(s) URL"}},
		{"gateway key", Options{Kind: ProviderClaude, Gateway: &Gateway{URL: "http://127.0.0.1:7010"}}, []string{"needs the key"}},
	} {
		_, err := New(tc.o)
		if err == nil {
			t.Errorf("%s: New(%+v) accepted it", tc.name, tc.o)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tc.name, err, w)
			}
		}
	}
}

func TestNewFillsInDefaults(t *testing.T) {
	for kind, policy := range map[string]string{ProviderClaude: PolicyAsk, ProviderCodex: "read-only", ProviderGemini: "default"} {
		a, err := New(Options{Kind: kind})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		o := a.(*adapter).o
		if a.Name() != kind || o.Policy != policy || o.Command[0] != kind || o.TurnTimeout != DefaultTurnTimeout {
			t.Errorf("%s: defaults %+v", kind, o)
		}
	}
	a, err := New(Options{Kind: ProviderCodex, Name: "codex-acct", Gateway: &Gateway{URL: "http://127.0.0.1:7010/", Key: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name() != "codex-acct" || a.(*adapter).o.Gateway.URL != "http://127.0.0.1:7010" {
		t.Errorf("options %+v", a.(*adapter).o)
	}
}

func TestStartNeedsAnAbsoluteWorkspace(t *testing.T) {
	a, err := New(Options{Kind: ProviderClaude})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Start(context.Background(), runner.Epoch{SessionID: "s", Workspace: "rel/ws"}, runnertest.Journal{}); err == nil {
		t.Fatal("Start accepted a relative workspace")
	}
}

func TestDecidesApprovals(t *testing.T) {
	for _, tc := range []struct{ kind, policy, want string }{
		{ProviderClaude, "", ""},
		{ProviderClaude, "ask", ""},
		{ProviderClaude, "acceptEdits", "permission-mode acceptEdits"},
		{ProviderClaude, "bypassPermissions", "permission-mode bypassPermissions"},
		{ProviderCodex, "", "sandbox read-only"},
		{ProviderCodex, "workspace-write", "sandbox workspace-write"},
		{ProviderGemini, "", "approval-mode default"},
		{ProviderGemini, "yolo", "approval-mode yolo"},
		{"copilot", "ask", ""},
	} {
		if got := DecidesApprovals(tc.kind, tc.policy); got != tc.want {
			t.Errorf("DecidesApprovals(%q, %q) = %q, want %q", tc.kind, tc.policy, got, tc.want)
		}
	}
}
