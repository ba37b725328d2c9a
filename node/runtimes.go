package node

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/echo"
)

// Runtime adapter kinds a runtime block can name.
const (
	AdapterEcho  = "echo"
	AdapterExec  = "exec"
	AdapterModel = "model"
	// The provider CLIs (node/runner/provider).
	AdapterClaude = "claude"
	AdapterCodex  = "codex"
	AdapterGemini = "gemini"
)

// RuntimeConfig is one `runtime "NAME" { adapter = … }` block: a named way
// to run a session's agent on this node. The name is what placements,
// `session create --adapter`, moves and admission use; node records
// advertise it. Only the fields of its adapter kind apply.
type RuntimeConfig struct {
	Name    string
	Adapter string // AdapterEcho, AdapterExec or AdapterModel
	// Source is where the block is written ("fak.hcl:12"), for errors.
	Source string

	// exec: the program and how it talks (text or jsonl).
	Command  []string
	Protocol string

	// model: an OpenAI-compatible Chat Completions endpoint.
	Endpoint      string
	Model         string
	Tools         []string
	Approve       []string // tools that run without asking; empty: ask for every one
	InputPerMTok  float64
	OutputPerMTok float64
	System        string
	// MaxRetries of a model call after 429, 5xx or a timeout (nil: the
	// adapter's default, 3).
	MaxRetries *int

	// AccountRef names an `account` block whose key the runtime gets (model:
	// the API key; exec: in the environment variable the account names).
	AccountRef string
	// TurnTimeout bounds one turn (0: the adapter's default).
	TurnTimeout time.Duration
	// Sandbox: "" or "none", or "bwrap" (the workspace is the only
	// writable place; data dir, tokens and TLS keys are not visible).
	Sandbox string
	// EchoTurn: echo's turn length (0: the node's --echo-turn).
	EchoTurn time.Duration

	// model (gateway = true) and claude, codex, gemini: see Gateway.
	// claude, codex, gemini: Command is the CLI and extra arguments
	// (empty: the adapter's name on PATH), Model the model it is asked
	// for. Policy is who decides tool approvals: claude "ask" (fak's
	// clients, the default) or a permission mode; codex a sandbox level;
	// gemini an approval mode. Gateway points the CLI at this node's
	// metering gateway (nil: when the node has an account of its
	// provider); a model runtime calls through it only when true, to the
	// upstream of its account_ref (an openai account).
	Policy  string
	Gateway *bool
}

// AccountConfig is one `account "NAME" { api_key_env = … }` block: how
// this node resolves an account ref to a credential. Credentials never
// enter the replicated state; only the name does.
type AccountConfig struct {
	Name       string
	Source     string
	APIKeyEnv  string // read the key from this environment variable of the node
	APIKeyFile string // or from this file (trailing newline trimmed)
	// Provider ("anthropic", "openai", "gemini") makes the account one the
	// gateway forwards that provider's calls with, to Upstream (default:
	// the provider's API). PassThrough forwards a caller's own key
	// instead of the account's, when the caller brings one.
	Provider    string
	Upstream    string
	PassThrough bool
}

// reservedRuntimes cannot be redefined by a block.
var reservedRuntimes = []string{fsm.DefaultRuntimeAdapter, fsm.ExternalRuntime}

// knownTools are the model runtime's built-in tools.
var knownTools = []string{"shell", "read_file", "write_file", "list_files"}

// where prefixes a block's source to an error.
func where(source, what string) string {
	if source == "" {
		return what
	}
	return source + ": " + what
}

// checkRuntimes validates the runtime and account blocks: every problem
// names the block's file:line and what to write instead.
func (c *Config) checkRuntimes() error {
	var errs []error
	accounts := map[string]bool{}
	for _, a := range c.Accounts {
		at := where(a.Source, fmt.Sprintf("account %q", a.Name))
		switch {
		case a.Name == "" || len(a.Name) > fsm.MaxPlacementFieldBytes:
			errs = append(errs, fmt.Errorf("%s: want a name of 1-%d bytes", at, fsm.MaxPlacementFieldBytes))
		case accounts[a.Name]:
			errs = append(errs, fmt.Errorf("%s: defined twice; keep one block", at))
		case a.APIKeyEnv != "" && a.APIKeyFile != "", a.APIKeyEnv == "" && a.APIKeyFile == "" && !a.PassThrough:
			errs = append(errs, fmt.Errorf(`%s: set exactly one of api_key_env = "OPENAI_API_KEY" or api_key_file = "/etc/fak/openai.key"`, at))
		}
		accounts[a.Name] = true
	}
	names := map[string]bool{}
	for _, r := range c.Runtimes {
		at := where(r.Source, fmt.Sprintf("runtime %q", r.Name))
		switch {
		case r.Name == "" || len(r.Name) > fsm.MaxPlacementFieldBytes || strings.ContainsAny(r.Name, " \t\n/"):
			errs = append(errs, fmt.Errorf("%s: want a name of 1-%d bytes without spaces or '/'", at, fsm.MaxPlacementFieldBytes))
		case slices.Contains(reservedRuntimes, r.Name):
			errs = append(errs, fmt.Errorf("%s: the name is reserved (built in); choose another, e.g. runtime %q", at, r.Name+"-2"))
		case names[r.Name]:
			errs = append(errs, fmt.Errorf("%s: defined twice; keep one block", at))
		}
		names[r.Name] = true
		if r.AccountRef != "" && !accounts[r.AccountRef] {
			errs = append(errs, fmt.Errorf("%s: unknown account %q; add account %q { api_key_env = \"…\" }", at, r.AccountRef, r.AccountRef))
		}
		if r.TurnTimeout < 0 {
			errs = append(errs, fmt.Errorf(`%s: turn_timeout must be positive, e.g. turn_timeout = "30m"`, at))
		}
		if r.Sandbox != "" && r.Sandbox != "none" && r.Sandbox != "bwrap" {
			errs = append(errs, fmt.Errorf(`%s: unknown sandbox %q; write sandbox = "bwrap" or sandbox = "none"`, at, r.Sandbox))
		}
		switch r.Adapter {
		case AdapterEcho:
		case AdapterExec:
			if len(r.Command) == 0 || r.Command[0] == "" {
				errs = append(errs, fmt.Errorf(`%s: adapter "exec" needs a command, e.g. command = ["/usr/local/bin/my-agent", "--json"]`, at))
			}
			if r.Protocol != "" && r.Protocol != "text" && r.Protocol != "jsonl" {
				errs = append(errs, fmt.Errorf(`%s: unknown protocol %q; write protocol = "text" or protocol = "jsonl"`, at, r.Protocol))
			}
		case AdapterModel:
			viaGateway := r.Gateway != nil && *r.Gateway
			if viaGateway && !slices.ContainsFunc(c.Accounts, func(a AccountConfig) bool { return a.Name == r.AccountRef && a.Provider == "openai" }) {
				errs = append(errs, fmt.Errorf(`%s: gateway = true needs account_ref naming an account of provider "openai" (its upstream serves the calls), e.g. account "local" { provider = "openai"  upstream = "http://127.0.0.1:8080"  pass_through = true }`, at))
			}
			if !viaGateway && (r.Endpoint == "" || !(strings.HasPrefix(r.Endpoint, "http://") || strings.HasPrefix(r.Endpoint, "https://"))) {
				errs = append(errs, fmt.Errorf(`%s: adapter "model" needs an endpoint URL, e.g. endpoint = "http://127.0.0.1:8080/v1"`, at))
			}
			if r.Model == "" {
				errs = append(errs, fmt.Errorf(`%s: adapter "model" needs a model, e.g. model = "gpt-4.1"`, at))
			}
			for _, t := range append(slices.Clone(r.Tools), r.Approve...) {
				if !slices.Contains(knownTools, t) {
					errs = append(errs, fmt.Errorf("%s: unknown tool %q; the tools are %s", at, t, strings.Join(knownTools, ", ")))
				}
			}
			if r.InputPerMTok < 0 || r.OutputPerMTok < 0 || r.MaxRetries != nil && *r.MaxRetries < 0 {
				errs = append(errs, fmt.Errorf("%s: prices and max_retries must not be negative", at))
			}
		case AdapterClaude, AdapterCodex, AdapterGemini:
			if r.Gateway != nil && *r.Gateway && !c.hasGatewayAccount(providerGateway[r.Adapter]) {
				errs = append(errs, fmt.Errorf(`%s: gateway = true needs an account of provider %q on this node: account "NAME" { provider = %q  api_key_env = "…" }`,
					at, providerGateway[r.Adapter], providerGateway[r.Adapter]))
			}
		case "":
			errs = append(errs, fmt.Errorf(`%s: adapter is required: adapter = "exec" (a program), "model" (an OpenAI-compatible endpoint), or "claude", "codex", "gemini" (a provider CLI)`, at))
		default:
			errs = append(errs, fmt.Errorf(`%s: unknown adapter %q; write adapter = "exec", "model", "claude", "codex", "gemini" or "echo"`, at, r.Adapter))
		}
	}
	errs = append(errs, c.checkGateway()...)
	return errors.Join(errs...)
}

// resolveKey reads an account's credential on this node.
func (c *Config) resolveKey(ref string) (string, error) {
	for _, a := range c.Accounts {
		if a.Name != ref {
			continue
		}
		if a.APIKeyEnv != "" {
			v, ok := os.LookupEnv(a.APIKeyEnv)
			if !ok || v == "" {
				return "", fmt.Errorf("account %q: environment variable %s is not set on node %s", ref, a.APIKeyEnv, c.Name)
			}
			return v, nil
		}
		b, err := os.ReadFile(a.APIKeyFile)
		if err != nil {
			return "", fmt.Errorf("account %q: %w", ref, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", fmt.Errorf("account %q is not configured on node %s", ref, c.Name)
}

// accountEnvVar is the variable an exec runtime finds its account's key
// in: the one the account reads it from, or API_KEY for a key file.
func (c *Config) accountEnvVar(ref string) string {
	for _, a := range c.Accounts {
		if a.Name == ref && a.APIKeyEnv != "" {
			return a.APIKeyEnv
		}
	}
	return "API_KEY"
}

// hiddenPaths are what a sandboxed runtime must not see: the node's data
// dir (its state, workspaces of other sessions), token file and TLS keys.
func (c *Config) hiddenPaths() []string {
	return slices.DeleteFunc([]string{c.DataDir, c.TokenFile, c.TLSKey, c.TLSCert, c.TLSCA}, func(s string) bool { return s == "" })
}

// runtimeNames lists every runtime this node offers: echo and the blocks.
func (c *Config) runtimeNames() []string {
	out := []string{echo.Name}
	for _, r := range c.Runtimes {
		out = append(out, r.Name)
	}
	return out
}

// adapters builds the runner's adapters: echo, then one per block.
func (c *Config) adapters() ([]runner.Adapter, error) {
	out := []runner.Adapter{echo.New(echo.Options{TurnDuration: echoTurn(c.EchoTurn)})}
	for _, r := range c.Runtimes {
		a, err := c.buildAdapter(r)
		if err != nil {
			return nil, errors.New(where(r.Source, fmt.Sprintf("runtime %q: %v", r.Name, err)))
		}
		out = append(out, a)
	}
	return out, nil
}
