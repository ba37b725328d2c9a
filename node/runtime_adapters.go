package node

import (
	"fmt"

	"github.com/fak-dev/fak/api/gateway"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/echo"
	"github.com/fak-dev/fak/node/runner/exec"
	"github.com/fak-dev/fak/node/runner/model"
	"github.com/fak-dev/fak/node/runner/provider"
)

// buildAdapter makes the adapter of one runtime block.
func (c *Config) buildAdapter(r RuntimeConfig) (runner.Adapter, error) {
	switch r.Adapter {
	case AdapterEcho:
		d := r.EchoTurn
		if d == 0 {
			d = c.EchoTurn
		}
		return named{echo.New(echo.Options{TurnDuration: echoTurn(d)}), r.Name}, nil
	case AdapterExec:
		var env []string
		if r.AccountRef != "" {
			key, err := c.resolveKey(r.AccountRef)
			if err != nil {
				return nil, err
			}
			env = append(env, c.accountEnvVar(r.AccountRef)+"="+key)
		}
		return exec.New(exec.Options{
			Name: r.Name, Command: r.Command, Protocol: r.Protocol, TurnTimeout: r.TurnTimeout,
			Sandbox: r.Sandbox, Hide: c.hiddenPaths(), Env: env, Groups: c.turnGroups,
		})
	case AdapterModel:
		retries := 0 // the adapter's default
		if r.MaxRetries != nil {
			retries = *r.MaxRetries
			if retries == 0 {
				retries = -1 // never
			}
		}
		o := model.Options{
			Name: r.Name, Endpoint: r.Endpoint, Model: r.Model, AccountRef: r.AccountRef,
			ResolveKey: c.resolveKey, Tools: r.Tools, AutoApprove: r.Approve,
			Price:  model.Price{InputPerMTok: r.InputPerMTok, OutputPerMTok: r.OutputPerMTok},
			System: r.System, TurnTimeout: r.TurnTimeout, MaxRetries: retries,
			Sandbox: r.Sandbox, Hide: c.hiddenPaths(), Groups: c.turnGroups, Logger: c.Logger,
		}
		if r.Gateway != nil && *r.Gateway {
			// Through this node's gateway: its account's upstream serves
			// the calls, its price table prices them.
			o.Gateway = &model.Gateway{URL: c.gatewayURL, Key: c.runtimeKey, Account: r.AccountRef}
		}
		return model.New(o)
	case AdapterClaude, AdapterCodex, AdapterGemini:
		return c.providerAdapter(r)
	}
	return nil, fmt.Errorf("unknown adapter %q", r.Adapter)
}

// providerGateway is the gateway provider a CLI runtime's calls go
// through: anthropic for claude, openai for codex, gemini for gemini.
var providerGateway = map[string]string{AdapterClaude: gateway.Anthropic, AdapterCodex: gateway.OpenAI, AdapterGemini: gateway.Gemini}

// usesGateway: a provider runtime is metered by this node's gateway unless
// its block says gateway = false; by default when the node has an account
// of its provider to forward with.
func (c *Config) usesGateway(r RuntimeConfig) bool {
	if r.Gateway != nil {
		return *r.Gateway
	}
	return c.hasGatewayAccount(providerGateway[r.Adapter])
}

// providerAdapter runs a provider CLI. Through the gateway it calls with
// this node's runtime key; directly, with its account's key in the
// provider's own variable.
func (c *Config) providerAdapter(r RuntimeConfig) (runner.Adapter, error) {
	o := provider.Options{Kind: r.Adapter, Name: r.Name, Command: r.Command, Model: r.Model, Policy: r.Policy,
		TurnTimeout: r.TurnTimeout, Sandbox: r.Sandbox, Hide: c.hiddenPaths(), Groups: c.turnGroups, Logger: c.Logger}
	if c.usesGateway(r) {
		o.Gateway = &provider.Gateway{URL: c.gatewayURL, Key: c.runtimeKey}
		if c.TLSCA != "" {
			// The CLIs are Node.js (claude, gemini) or Rust (codex).
			o.Env = append(o.Env, "NODE_EXTRA_CA_CERTS="+c.TLSCA, "SSL_CERT_FILE="+c.TLSCA)
		}
	} else if r.AccountRef != "" {
		key, err := c.resolveKey(r.AccountRef)
		if err != nil {
			return nil, err
		}
		o.Env = append(o.Env, providerKeyVar[r.Adapter]+"="+key)
	}
	return provider.New(o)
}

// providerKeyVar is where each CLI reads an API key (research notes
// §1.5, §2.5, §3.5).
var providerKeyVar = map[string]string{AdapterClaude: "ANTHROPIC_API_KEY", AdapterCodex: "CODEX_API_KEY", AdapterGemini: "GEMINI_API_KEY"}

// runtimeApprovals lists the runtimes that decide approvals themselves,
// as name=policy, for the node record.
func (c *Config) runtimeApprovals() []string {
	var out []string
	for _, r := range c.Runtimes {
		if _, ok := providerGateway[r.Adapter]; !ok {
			continue
		}
		if p := provider.DecidesApprovals(r.Adapter, r.Policy); p != "" {
			out = append(out, r.Name+"="+p)
		}
	}
	return sortedSet(out)
}

// Meters of a runtime, as the node record says them.
const (
	MeterGateway = "gateway" // the node's gateway charges every model call
	MeterCLI     = "cli"     // a provider CLI's own reported cost
	MeterRuntime = "runtime" // a model runtime's own count of its calls
)

// runtimeMeters says what meters each provider CLI and model runtime, as
// name=meter (sorted), for the node record: a provider CLI is metered by
// the gateway as soon as the node has an account of its provider (unless
// gateway = false), so adding one switches it (README, "Metering").
func (c *Config) runtimeMeters() []string {
	var out []string
	for _, r := range c.Runtimes {
		var m string
		switch {
		case r.Adapter == AdapterModel && r.Gateway != nil && *r.Gateway:
			m = MeterGateway
		case r.Adapter == AdapterModel:
			m = MeterRuntime
		case providerGateway[r.Adapter] == "":
			continue
		case c.usesGateway(r):
			m = MeterGateway
		default:
			m = MeterCLI
		}
		out = append(out, r.Name+"="+m)
	}
	return sortedSet(out)
}

// named serves an adapter under a runtime block's name.
type named struct {
	runner.Adapter
	name string
}

func (n named) Name() string { return n.name }
