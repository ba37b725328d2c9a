package node

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"slices"

	"github.com/fak-dev/fak/api"
	"github.com/fak-dev/fak/api/gateway"
)

// PriceConfig is one `price "MODEL" { input_per_mtok = … }` block: what a
// model's tokens cost, for the gateway's spend. MODEL is a name or a
// prefix ending in '*'.
type PriceConfig struct {
	Model  string
	Source string
	gateway.Price
}

// defaultUpstreams are the providers' own APIs, for an account that
// names its provider and no upstream.
var defaultUpstreams = map[string]string{
	gateway.Anthropic: "https://api.anthropic.com",
	gateway.OpenAI:    "https://api.openai.com",
	gateway.Gemini:    "https://generativelanguage.googleapis.com",
}

// checkGateway validates the gateway side of the account blocks and the
// price blocks.
func (c *Config) checkGateway() []error {
	var errs []error
	for _, a := range c.Accounts {
		at := where(a.Source, fmt.Sprintf("account %q", a.Name))
		if a.Provider == "" {
			if a.Upstream != "" || a.PassThrough {
				errs = append(errs, fmt.Errorf(`%s: upstream and pass_through need the account's provider: provider = "anthropic", "openai" or "gemini"`, at))
			}
			continue
		}
		if _, ok := defaultUpstreams[a.Provider]; !ok {
			errs = append(errs, fmt.Errorf(`%s: unknown provider %q; write provider = "anthropic", "openai" or "gemini"`, at, a.Provider))
		}
		if a.Upstream != "" {
			if u, err := url.Parse(a.Upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf(`%s: upstream %q: want a URL such as upstream = "https://api.anthropic.com"`, at, a.Upstream))
			}
		}
	}
	models := map[string]bool{}
	for _, p := range c.Prices {
		at := where(p.Source, fmt.Sprintf("price %q", p.Model))
		switch {
		case p.Model == "":
			errs = append(errs, fmt.Errorf(`%s: name the model, e.g. price "claude-sonnet-4*" { … }`, at))
		case models[p.Model]:
			errs = append(errs, fmt.Errorf("%s: defined twice; keep one block", at))
		}
		models[p.Model] = true
	}
	if _, err := gateway.NewPriceTable(c.priceMap()); err != nil {
		errs = append(errs, err)
	}
	return errs
}

func (c *Config) priceMap() map[string]gateway.Price {
	m := make(map[string]gateway.Price, len(c.Prices))
	for _, p := range c.Prices {
		m[p.Model] = p.Price
	}
	return m
}

// gatewayConfig is the API's gateway: the accounts that name a provider,
// in config order, the price table, and the key this node's runtimes
// call it with.
func (c *Config) gatewayConfig(runtimeKey string) (*api.GatewayConfig, error) {
	prices, err := gateway.NewPriceTable(c.priceMap())
	if err != nil {
		return nil, err
	}
	g := &api.GatewayConfig{Prices: prices, RuntimeKey: runtimeKey}
	for _, a := range c.Accounts {
		if a.Provider == "" {
			continue
		}
		acct := gateway.Account{Name: a.Name, Provider: a.Provider, Upstream: a.Upstream, PassThrough: a.PassThrough}
		if acct.Upstream == "" {
			acct.Upstream = defaultUpstreams[a.Provider]
		}
		if a.APIKeyEnv != "" || a.APIKeyFile != "" {
			name := a.Name
			acct.Key = func() (string, error) { return c.resolveKey(name) }
		}
		g.Accounts = append(g.Accounts, acct)
	}
	return g, nil
}

// hasGatewayAccount reports whether the gateway can forward provider's
// calls from this node.
func (c *Config) hasGatewayAccount(provider string) bool {
	return slices.ContainsFunc(c.Accounts, func(a AccountConfig) bool { return a.Provider == provider })
}

// newRuntimeKey draws the credential this node's runtimes use at its
// gateway (they hold no API token).
func newRuntimeKey() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return "fakrt_" + hex.EncodeToString(b[:])
}

// gatewayURL is where this node's runtimes reach its API: loopback, with
// the API's scheme.
func gatewayURL(a net.Addr, tls bool) string {
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	return scheme + localAddr(a)
}
