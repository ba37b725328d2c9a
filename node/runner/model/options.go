package model

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fak-dev/fak/api/gateway"
	"github.com/fak-dev/fak/node/runner/proc"
)

// Built-in tools.
const (
	ToolShell     = "shell"
	ToolReadFile  = "read_file"
	ToolWriteFile = "write_file"
	ToolListFiles = "list_files"
)

// toolOrder is the order tools are offered to the model in, whatever the
// order of the configuration: the request depends on the set, not on how
// a runtime block happens to list it.
var toolOrder = []string{ToolShell, ToolReadFile, ToolWriteFile, ToolListFiles}

// Defaults of Options.
const (
	DefaultTurnTimeout   = 30 * time.Minute
	DefaultMaxRetries    = 3
	DefaultMaxToolOutput = 16 << 10
	DefaultMaxSteps      = 32
	DefaultStallTimeout  = 5 * time.Minute
)

// MaxRetryWait caps one wait before a retry, whatever Retry-After asks:
// a turn does not sit silent for minutes on a header's word.
const MaxRetryWait = 30 * time.Second

// ShellTimeout bounds one shell tool call (the turn's own timeout bounds
// it too).
const ShellTimeout = 10 * time.Minute

// Price is what the endpoint charges, in currency units per million
// tokens: the gateway's price (one rule for every charge fak makes).
type Price = gateway.Price

// spendMicros is the spend of one call in millionths of a currency unit.
func spendMicros(p Price, prompt, completion int64) uint64 {
	return p.SpendMicros(gateway.Usage{InputTokens: uint64(max(prompt, 0)), OutputTokens: uint64(max(completion, 0))})
}

// Options configure a model runtime (a runtime block with adapter =
// "model").
type Options struct {
	// Name is the runtime's name, which placements use ("gpt").
	Name string
	// Endpoint is the OpenAI-compatible base URL
	// (http://127.0.0.1:8080/v1); requests go to Endpoint/chat/completions.
	Endpoint string
	// Model is the default model; a placement's model overrides it.
	Model string
	// AccountRef is the default account; a placement's overrides it.
	AccountRef string
	// ResolveKey looks an account's API key up on this node. nil, or an
	// empty account reference, sends no key.
	ResolveKey func(accountRef string) (string, error)
	// Tools are the built-in tools offered to the model: a subset of
	// shell, read_file, write_file, list_files.
	Tools []string
	// AutoApprove lists tools that run without asking; every other tool
	// call waits for an approval.
	AutoApprove []string
	Price       Price
	// System is the system prompt; empty uses DefaultSystem.
	System string
	// TurnTimeout bounds a turn, approvals included (default 30m).
	TurnTimeout time.Duration
	// MaxRetries is how often a model call that met 429, 5xx, a timeout
	// or a lost connection is retried (default 3; negative: never).
	MaxRetries int
	// StallTimeout is how long the endpoint may stay silent, before its
	// response starts or between two chunks, before the call is given up
	// as timed out (default 5m: a local server may take minutes to read
	// a long prompt).
	StallTimeout time.Duration
	// HTTPClient sends the requests; nil uses one with dial and TLS
	// timeouts and no overall timeout (streams are long; StallTimeout
	// catches a silent endpoint).
	HTTPClient *http.Client
	// Sandbox and Hide confine the shell tool (proc.Spec).
	Sandbox string
	Hide    []string
	// Groups records the shell tool's process groups so they die with
	// the node (proc.Spec.Groups).
	Groups *proc.Groups
	// MaxToolOutput caps what one tool call feeds back, in bytes
	// (default 16 KiB); the rest is cut with a note saying so.
	MaxToolOutput int
	// MaxSteps bounds the model calls of one turn (default 32).
	MaxSteps int
	// Logger logs retries; nil logs nothing.
	Logger hclog.Logger
	// Gateway, when set, sends every call through the node's metering
	// gateway (its OpenAI route, to the upstream of Gateway.Account) with
	// the session as X-Trace-Id: the gateway charges the calls' queries,
	// tokens and spend, and the runtime charges only its tool calls
	// (runner.Metered). Endpoint is then the gateway's.
	Gateway *Gateway
}

// Gateway is the node's metering gateway as a model runtime calls it.
type Gateway struct {
	URL     string // the node's API base URL
	Key     string // the credential the gateway accepts from runtimes
	Account string // the openai account whose upstream serves the calls
}

// withDefaults fills in defaults and checks o.
func (o Options) withDefaults() (Options, error) {
	var errs []error
	if o.Name == "" {
		errs = append(errs, errors.New("a model runtime needs a name"))
	}
	if o.Gateway != nil {
		o.Endpoint = o.Gateway.URL + "/gateway/openai/v1"
	}
	if u, err := url.Parse(o.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("endpoint %q is not an http(s) URL (e.g. https://api.openai.com/v1)", o.Endpoint))
	}
	if o.Model == "" {
		errs = append(errs, errors.New("a model runtime needs a model"))
	}
	for _, t := range o.Tools {
		if !slices.Contains(toolOrder, t) {
			errs = append(errs, fmt.Errorf("unknown tool %q (the built-in tools are %v)", t, toolOrder))
		}
	}
	for _, t := range o.AutoApprove {
		if !slices.Contains(o.Tools, t) {
			errs = append(errs, fmt.Errorf("approve lists %q, which is not one of the runtime's tools %v", t, o.Tools))
		}
	}
	if o.Price.InputPerMTok < 0 || o.Price.OutputPerMTok < 0 {
		errs = append(errs, errors.New("a price cannot be negative"))
	}
	if o.Sandbox != "" && o.Sandbox != proc.SandboxNone && o.Sandbox != proc.SandboxBwrap {
		errs = append(errs, fmt.Errorf("unknown sandbox %q (want %q or %q)", o.Sandbox, proc.SandboxNone, proc.SandboxBwrap))
	}
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	if o.System == "" {
		o.System = DefaultSystem
	}
	if o.TurnTimeout <= 0 {
		o.TurnTimeout = DefaultTurnTimeout
	}
	switch {
	case o.MaxRetries == 0:
		o.MaxRetries = DefaultMaxRetries
	case o.MaxRetries < 0:
		o.MaxRetries = 0
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.HTTPClient == nil {
		o.HTTPClient = defaultHTTPClient()
	}
	if o.MaxToolOutput <= 0 {
		o.MaxToolOutput = DefaultMaxToolOutput
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = DefaultMaxSteps
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return o, nil
}

func defaultHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}}
}

// DefaultSystem tells the model where it is and what its tools do. It
// names no path of this node: the prompt, like the rest of the context,
// must be the same on whichever node serves the session.
const DefaultSystem = "You are an agent working in a session's workspace, a directory that is your working directory. " +
	"Use the tools you are given to inspect and change files there and to run commands; " +
	"file paths are relative to the workspace, and paths that leave it are refused. " +
	"Some tool calls wait for a person's approval and may be denied. " +
	"Answer concisely and say what you did."
