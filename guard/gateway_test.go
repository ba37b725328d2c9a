package guard

import (
	"slices"
	"testing"
)

// The guard points each provider at its node's gateway through the
// launch's path, with fak's token where the CLI can add a header, and
// keeps the user's own headers and keys.
func TestMeterThroughGateway(t *testing.T) {
	claude := &Launch{Provider: "claude", Args: []string{"claude"}, Env: []string{"ANTHROPIC_CUSTOM_HEADERS=X-Team: a", "HOME=/h"}}
	MeterThroughGateway(claude, "http://n1:7401/", "lnc_1", "tok")
	if v, _ := lookupEnv(claude.Env, "ANTHROPIC_BASE_URL"); v != "http://n1:7401/gateway/launch/lnc_1/anthropic" {
		t.Fatalf("ANTHROPIC_BASE_URL %q", v)
	}
	if v, _ := lookupEnv(claude.Env, "ANTHROPIC_CUSTOM_HEADERS"); v != "X-Team: a\nX-Fak-Token: tok" {
		t.Fatalf("ANTHROPIC_CUSTOM_HEADERS %q: want the user's header kept and fak's token added", v)
	}

	gemini := &Launch{Provider: "gemini", Args: []string{"gemini"}}
	MeterThroughGateway(gemini, "https://n2:7401", "lnc_2", "")
	if v, _ := lookupEnv(gemini.Env, "GOOGLE_GEMINI_BASE_URL"); v != "https://n2:7401/gateway/launch/lnc_2/gemini" {
		t.Fatalf("GOOGLE_GEMINI_BASE_URL %q", v)
	}
	if _, set := lookupEnv(gemini.Env, "GEMINI_CLI_CUSTOM_HEADERS"); set {
		t.Fatal("no token, no header")
	}

	codex := &Launch{Provider: "codex", Args: []string{"codex", "exec", "hi"}}
	MeterThroughGateway(codex, "http://n1:7401", "lnc_3", "tok")
	if want := []string{"codex", "-c", `openai_base_url="http://n1:7401/gateway/launch/lnc_3/openai/v1"`, "exec", "hi"}; !slices.Equal(codex.Args, want) {
		t.Fatalf("codex args %q, want %q", codex.Args, want)
	}
	if v, _ := lookupEnv(codex.Env, "CODEX_API_KEY"); v != "tok" {
		t.Fatalf("CODEX_API_KEY %q", v)
	}
	own := &Launch{Provider: "codex", Args: []string{"codex"}, Env: []string{"CODEX_API_KEY=mine"}}
	MeterThroughGateway(own, "http://n1:7401", "lnc_4", "tok")
	if v, _ := lookupEnv(own.Env, "CODEX_API_KEY"); v != "mine" {
		t.Fatalf("the user's own CODEX_API_KEY was replaced: %q", v)
	}

	other := &Launch{Provider: "mytool", Args: []string{"mytool"}, Env: []string{"A=1"}}
	MeterThroughGateway(other, "http://n1:7401", "lnc_5", "tok")
	if !slices.Equal(other.Env, []string{"A=1"}) || !slices.Equal(other.Args, []string{"mytool"}) {
		t.Fatalf("an unknown harness was changed: %v %v", other.Args, other.Env)
	}
}
