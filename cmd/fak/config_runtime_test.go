package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"
)

const runtimeHCL = `name = "n1"
runtime "shell-agent" {
  adapter      = "exec"
  command      = ["/usr/local/bin/my-agent", "--json"]
  protocol     = "jsonl"
  turn_timeout = "30m"
  sandbox      = "bwrap"
}
runtime "gpt" {
  adapter     = "model"
  endpoint    = "http://127.0.0.1:8080/v1"
  model       = "gpt-4.1"
  account_ref = "openai-main"
  tools       = ["shell", "read_file", "write_file", "list_files"]
  approve     = ["read_file", "list_files"]
  price       = { input_per_mtok = 2.0, output_per_mtok = 8.0 }
}
account "openai-main" { api_key_env = "OPENAI_API_KEY" }
`

func TestConfigRuntimeBlocks(t *testing.T) {
	f := newTestAgentFlags()
	blocks, err := parseAgentConfig(f.fs, []string{"--config", writeConfig(t, "fak.hcl", runtimeHCL)})
	if err != nil {
		t.Fatalf("%v\n%s", err, f.out.String())
	}
	if f.name != "n1" {
		t.Fatalf("flat keys still apply next to blocks: name %q", f.name)
	}
	if len(blocks.Runtimes) != 2 || len(blocks.Accounts) != 1 {
		t.Fatalf("blocks %+v", blocks)
	}
	sh, gpt := blocks.Runtimes[0], blocks.Runtimes[1]
	if sh.Name != "shell-agent" || sh.Adapter != "exec" || strings.Join(sh.Command, " ") != "/usr/local/bin/my-agent --json" ||
		sh.Protocol != "jsonl" || sh.TurnTimeout != 30*time.Minute || sh.Sandbox != "bwrap" || !strings.HasSuffix(sh.Source, "fak.hcl:2") {
		t.Fatalf("exec runtime %+v", sh)
	}
	if gpt.Endpoint != "http://127.0.0.1:8080/v1" || gpt.Model != "gpt-4.1" || gpt.AccountRef != "openai-main" ||
		len(gpt.Tools) != 4 || strings.Join(gpt.Approve, ",") != "read_file,list_files" || gpt.InputPerMTok != 2 || gpt.OutputPerMTok != 8 {
		t.Fatalf("model runtime %+v", gpt)
	}
	if a := blocks.Accounts[0]; a.Name != "openai-main" || a.APIKeyEnv != "OPENAI_API_KEY" || !strings.HasSuffix(a.Source, "fak.hcl:18") {
		t.Fatalf("account %+v", a)
	}
}

// Problems a block can have are reported with file:line and what to write.
func TestConfigRuntimeBlockErrors(t *testing.T) {
	for _, tc := range []struct{ name, hcl, want string }{
		{"wrong adapter's setting", "runtime \"a\" {\n adapter = \"model\"\n command = [\"x\"]\n}\n", `bad.hcl:3: command is not a setting of adapter "model" (it is for exec, claude, codex, gemini)`},
		{"unknown setting", "runtime \"a\" {\n adapter = \"exec\"\n comand = [\"x\"]\n}\n", "bad.hcl:3"},
		{"no adapter", "runtime \"a\" {\n command = [\"x\"]\n}\n", `bad.hcl:1`},
		{"approve", "runtime \"a\" {\n adapter = \"model\"\n approve = \"always\"\n}\n", `approve = "always": write approve = "ask" or a list`},
		{"duration", "runtime \"a\" {\n adapter = \"exec\"\n turn_timeout = \"soon\"\n}\n", `bad.hcl:3: turn_timeout = "soon": want a duration`},
		{"command type", "runtime \"a\" {\n adapter = \"exec\"\n command = \"x\"\n}\n", `bad.hcl:3: command: want a list of strings`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestAgentFlags()
			_, err := parseAgentConfig(f.fs, []string{"--config", writeConfig(t, "bad.hcl", tc.hcl)})
			if err == nil || !strings.Contains(f.out.String(), tc.want) {
				t.Fatalf("want %q in:\n%s", tc.want, f.out.String())
			}
		})
	}
}

// The node's checks run at start, before anything listens: a bad block
// stops the agent with its file:line.
func TestAgentRefusesBadRuntimeBlock(t *testing.T) {
	for _, tc := range []struct{ hcl, want string }{
		{"runtime \"a\" {\n adapter = \"exec\"\n}\n", `agent.hcl:1: runtime "a": adapter "exec" needs a command, e.g. command = [`},
		{"runtime \"a\" {\n adapter = \"shell\"\n}\n", `agent.hcl:1: runtime "a": unknown adapter "shell"; write adapter = "exec", "model", "claude", "codex", "gemini" or "echo"`},
		{"runtime \"g\" {\n adapter = \"model\"\n endpoint = \"http://x/v1\"\n model = \"m\"\n account_ref = \"nope\"\n}\n", `agent.hcl:1: runtime "g": unknown account "nope"; add account "nope"`},
		{"runtime \"echo\" {\n adapter = \"echo\"\n}\n", `the name is reserved`},
		{"account \"a\" {\n provider = \"azure\"\n api_key_env = \"X\"\n}\n", `agent.hcl:1: account "a": unknown provider "azure"; write provider = "anthropic", "openai" or "gemini"`},
		{"account \"a\" {\n upstream = \"http://x\"\n api_key_env = \"X\"\n}\n", `agent.hcl:1: account "a": upstream and pass_through need the account's provider`},
		{"runtime \"c\" {\n adapter = \"claude\"\n gateway = true\n}\n", `agent.hcl:1: runtime "c": gateway = true needs an account of provider "anthropic" on this node`},
		{"runtime \"x\" {\n adapter = \"codex\"\n policy = \"yolo\"\n}\n", `agent.hcl:1: runtime "x": codex runtime "x": `},
	} {
		path := writeConfig(t, "agent.hcl", tc.hcl)
		var out, errOut bytes.Buffer
		code := runAgent([]string{"--name", "n1", "--data-dir", t.TempDir(), "--no-auth", "--api-addr", "127.0.0.1:0",
			"--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--config", path}, &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Fatalf("exit %d, want %q in:\n%s", code, tc.want, errOut.String())
		}
	}
}

// price also reads as a block over several lines.
func TestConfigPriceBlock(t *testing.T) {
	f := newTestAgentFlags()
	blocks, err := parseAgentConfig(f.fs, []string{"--config", writeConfig(t, "fak.hcl", `runtime "gpt" {
  adapter = "model"
  price {
    input_per_mtok  = 0.5
    output_per_mtok = 1.5
  }
}
`)})
	if err != nil {
		t.Fatalf("%v\n%s", err, f.out.String())
	}
	if r := blocks.Runtimes[0]; r.InputPerMTok != 0.5 || r.OutputPerMTok != 1.5 {
		t.Fatalf("price %+v", r)
	}
}

var _ = flag.ContinueOnError

// Provider CLI runtimes, gateway accounts and price blocks (issue 15).
func TestConfigProviderAndGatewayBlocks(t *testing.T) {
	f := newTestAgentFlags()
	blocks, err := parseAgentConfig(f.fs, []string{"--config", writeConfig(t, "fak.hcl", `name = "n1"
runtime "claude" {
  adapter = "claude"
  command = ["/usr/local/bin/claude", "--bare"]
  model   = "claude-sonnet-4"
  policy  = "ask"
  gateway = false
}
runtime "codex" {
  adapter = "codex"
  policy  = "workspace-write"
}
account "anthropic-main" {
  provider     = "anthropic"
  upstream     = "http://127.0.0.1:9000"
  api_key_env  = "ANTHROPIC_API_KEY"
  pass_through = true
}
price "claude-sonnet-4*" {
  input_per_mtok       = 3
  output_per_mtok      = 15
  cache_read_per_mtok  = 0.3
  cache_write_per_mtok = 3.75
}
`)})
	if err != nil {
		t.Fatalf("%v\n%s", err, f.out.String())
	}
	if len(blocks.Runtimes) != 2 || len(blocks.Accounts) != 1 || len(blocks.Prices) != 1 {
		t.Fatalf("blocks %+v", blocks)
	}
	cl, cx := blocks.Runtimes[0], blocks.Runtimes[1]
	if cl.Adapter != "claude" || strings.Join(cl.Command, " ") != "/usr/local/bin/claude --bare" || cl.Model != "claude-sonnet-4" ||
		cl.Policy != "ask" || cl.Gateway == nil || *cl.Gateway {
		t.Fatalf("claude runtime %+v", cl)
	}
	if cx.Adapter != "codex" || cx.Policy != "workspace-write" || cx.Gateway != nil {
		t.Fatalf("codex runtime %+v", cx)
	}
	if a := blocks.Accounts[0]; a.Provider != "anthropic" || a.Upstream != "http://127.0.0.1:9000" || !a.PassThrough || a.APIKeyEnv != "ANTHROPIC_API_KEY" {
		t.Fatalf("account %+v", a)
	}
	if p := blocks.Prices[0]; p.Model != "claude-sonnet-4*" || p.InputPerMTok != 3 || p.OutputPerMTok != 15 || p.CacheReadPerMTok != 0.3 ||
		p.CacheWritePerMTok != 3.75 || !strings.HasSuffix(p.Source, "fak.hcl:19") {
		t.Fatalf("price %+v", p)
	}
}

// A provider block's settings belong to it, and the gateway's checks name
// the line and what to write.
func TestConfigProviderBlockErrors(t *testing.T) {
	for _, tt := range []struct{ text, want string }{
		{"runtime \"c\" {\n adapter = \"codex\"\n protocol = \"jsonl\"\n}\n", `bad.hcl:3: protocol is not a setting of adapter "codex" (it is for exec)`},
		{"runtime \"c\" {\n adapter = \"claude\"\n gateway = \"yes\"\n}\n", `bad.hcl:3: gateway: want true or false, got string`},
		{"price \"m\" {\n input_per_mtok = \"3\"\n}\n", `bad.hcl:2: input_per_mtok: want a number`},
	} {
		out, path := configErrors(t, "bad.hcl", tt.text)
		if !strings.Contains(out, strings.Replace(tt.want, "bad.hcl", path, 1)) {
			t.Errorf("want %q in:\n%s", tt.want, out)
		}
	}
}
