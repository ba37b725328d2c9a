package provider

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/proc"
)

// Kinds of provider CLI.
const (
	ProviderClaude = "claude"
	ProviderCodex  = "codex"
	ProviderGemini = "gemini"
)

// PolicyAsk is claude's default policy: its permission prompts go to
// fak's clients as approvals.
const PolicyAsk = "ask"

// DefaultTurnTimeout bounds a turn unless the runtime block says otherwise.
const DefaultTurnTimeout = 30 * time.Minute

// Reasons a turn fails with, beyond the fsm's own (BUDGET_EXHAUSTED).
const (
	ReasonRuntimeStart    = "RUNTIME_START"    // the CLI could not be started (not installed, not executable)
	ReasonRuntimeExit     = "RUNTIME_EXIT"     // the CLI exited non-zero; the message holds its stderr's tail
	ReasonRuntimeProtocol = "RUNTIME_PROTOCOL" // a line fak cannot read, or no result before the CLI ended
	ReasonProviderError   = "PROVIDER_ERROR"   // the CLI reported the turn failed (API error, turn limit, ...)
	ReasonTurnTimeout     = "TURN_TIMEOUT"
	ReasonPromptTooLarge  = "PROMPT_TOO_LARGE" // gemini takes the prompt as one argument, which the kernel bounds
)

// exitGrace is how long a CLI may take to exit once it has written its
// result (or closed its stdout without one) before its group is killed.
const exitGrace = 10 * time.Second

// The policies of each kind (Options.Policy), the default first.
var (
	claudeModes    = []string{"default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"}
	codexSandboxes = []string{"read-only", "workspace-write", "danger-full-access"}
	geminiModes    = []string{"default", "auto_edit", "yolo", "plan"}
)

// Options configure one provider runtime: a runtime block of the node's
// configuration.
type Options struct {
	// Kind is ProviderClaude, ProviderCodex or ProviderGemini.
	Kind string
	// Name is the runtime block's name, which placements use (default:
	// Kind).
	Name string
	// Command is the binary and extra leading arguments; empty runs Kind,
	// looked up on PATH.
	Command []string
	// Model is passed as --model when set; else the CLI's own default.
	Model string
	// Policy says who decides tool approvals (see DecidesApprovals):
	//   - claude: PolicyAsk (the default) routes every permission prompt
	//     to fak's clients (--permission-prompt-tool stdio: each
	//     can_use_tool request becomes approval.requested), or a Claude
	//     permission mode (default, acceptEdits, plan, bypassPermissions,
	//     dontAsk, auto) passed as --permission-mode, with no prompt tool.
	//   - codex: the sandbox level, read-only (the default),
	//     workspace-write or danger-full-access (--sandbox); codex exec
	//     cannot hand approvals to anyone.
	//   - gemini: the approval mode, default (the default), auto_edit,
	//     yolo or plan (--approval-mode); headless gemini cannot hand
	//     approvals to anyone (what would ask is denied).
	Policy string
	// Env is KEY=VALUE pairs the runtime block hands over (an account's
	// key, say), added to the clean environment (proc.Env).
	Env []string
	// TurnTimeout bounds a turn, approval waits included (0:
	// DefaultTurnTimeout).
	TurnTimeout time.Duration
	// Sandbox is "", proc.SandboxNone or proc.SandboxBwrap. In bwrap
	// everything but the workspace is read-only, the CLI's state under
	// HOME included: hand over HOME=<a directory in the workspace> in Env
	// (and the CLI's credentials there, or use the gateway) to let it
	// keep its threads.
	Sandbox string
	// Hide lists paths a sandbox makes invisible.
	Hide []string
	// Groups records each turn's process group so it dies with the node
	// (proc.Spec.Groups).
	Groups *proc.Groups
	// Gateway, when set, points the CLI at the node's metering gateway:
	// model calls are charged there, so the runtime charges nothing
	// itself (it is runner.Metered). When nil the CLI talks to its
	// provider directly and the runtime charges the usage the CLI
	// reports.
	Gateway *Gateway
	// Logger logs what a turn drops or works around; nil logs nothing.
	Logger hclog.Logger
}

// Gateway is the node's metering gateway as a CLI reaches it.
type Gateway struct {
	// URL is the node's API base URL (http://127.0.0.1:7010).
	URL string
	// Key is the credential the gateway accepts from runtimes, sent as
	// the provider's API key.
	Key string
}

// New validates o and returns the adapter. A bad runtime block is refused
// here, so the node stops at start rather than failing every turn.
func New(o Options) (runner.Adapter, error) {
	var c dialect
	switch o.Kind {
	case ProviderClaude:
		c = claude{}
	case ProviderCodex:
		c = codex{}
	case ProviderGemini:
		c = gemini{}
	default:
		return nil, fmt.Errorf("provider runtime %q: unknown kind %q (write %q, %q or %q)", o.Name, o.Kind, ProviderClaude, ProviderCodex, ProviderGemini)
	}
	if o.Name == "" {
		o.Name = o.Kind
	}
	what := fmt.Sprintf("%s runtime %q", o.Kind, o.Name)
	if len(o.Command) == 0 {
		o.Command = []string{o.Kind}
	}
	if o.Command[0] == "" {
		return nil, fmt.Errorf("%s: empty command (write command = [%q] or a path to it)", what, o.Kind)
	}
	policy, err := checkPolicy(o.Kind, o.Policy)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	o.Policy = policy
	if strings.HasPrefix(o.Model, "-") {
		return nil, fmt.Errorf("%s: model %q starts with a dash", what, o.Model)
	}
	switch {
	case o.TurnTimeout < 0:
		return nil, fmt.Errorf("%s: negative turn_timeout %s", what, o.TurnTimeout)
	case o.TurnTimeout == 0:
		o.TurnTimeout = DefaultTurnTimeout
	}
	if err := proc.CheckSandbox(o.Sandbox); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	for _, kv := range o.Env {
		k, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || k == "":
			return nil, fmt.Errorf("%s: env entry %q is not KEY=VALUE", what, kv)
		case strings.HasPrefix(k, "FAK_"):
			// fak sets its own FAK_ variables and never hands over a token.
			return nil, fmt.Errorf("%s: env %s: the FAK_ names are fak's own", what, k)
		}
	}
	if g := o.Gateway; g != nil {
		u, err := url.Parse(g.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s: gateway URL %q is not an http(s) URL (e.g. http://127.0.0.1:7010)", what, g.URL)
		}
		if g.Key == "" {
			return nil, fmt.Errorf("%s: the gateway needs the key it accepts from runtimes", what)
		}
		o.Gateway = &Gateway{URL: strings.TrimRight(g.URL, "/"), Key: g.Key}
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	o.Command = slices.Clone(o.Command)
	o.Hide = slices.Clone(o.Hide)
	o.Env = slices.Clone(o.Env)
	return &adapter{o: o, cli: c}, nil
}

// checkPolicy returns the policy with its default filled in, or an error
// saying what to write instead.
func checkPolicy(kind, policy string) (string, error) {
	switch kind {
	case ProviderClaude:
		if policy == "" || policy == PolicyAsk || slices.Contains(claudeModes, policy) {
			return orDefault(policy, PolicyAsk), nil
		}
		return "", fmt.Errorf("unknown policy %q (write %q to have fak's clients answer claude's permission prompts, or a permission mode claude decides by itself: %s)",
			policy, PolicyAsk, strings.Join(claudeModes, ", "))
	case ProviderCodex:
		if policy == "" || slices.Contains(codexSandboxes, policy) {
			return orDefault(policy, codexSandboxes[0]), nil
		}
		why := ""
		if policy == PolicyAsk {
			why = "codex exec cannot hand approvals to fak; "
		}
		return "", fmt.Errorf("unknown policy %q (%swrite a sandbox level: %s)", policy, why, strings.Join(codexSandboxes, ", "))
	case ProviderGemini:
		if policy == "" || slices.Contains(geminiModes, policy) {
			return orDefault(policy, geminiModes[0]), nil
		}
		why := ""
		if policy == PolicyAsk {
			why = "headless gemini cannot hand approvals to fak; "
		}
		return "", fmt.Errorf("unknown policy %q (%swrite an approval mode: %s)", policy, why, strings.Join(geminiModes, ", "))
	}
	return "", fmt.Errorf("unknown kind %q", kind)
}

// orDefault is s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// DecidesApprovals reports the policy by which a runtime of kind decides
// tool approvals by itself ("permission-mode acceptEdits", "sandbox
// read-only", "approval-mode default"), or "" when fak's clients answer
// them (claude with policy "ask" or empty). Unknown kinds are "".
func DecidesApprovals(kind, policy string) string {
	switch kind {
	case ProviderClaude:
		if policy == "" || policy == PolicyAsk {
			return ""
		}
		return "permission-mode " + policy
	case ProviderCodex:
		return "sandbox " + orDefault(policy, codexSandboxes[0])
	case ProviderGemini:
		return "approval-mode " + orDefault(policy, geminiModes[0])
	}
	return ""
}

type adapter struct {
	o   Options
	cli dialect
}

func (a *adapter) Name() string { return a.o.Name }

// Start prepares the epoch's runtime: it resumes the session's thread
// when that thread is this kind's, else its first turn starts one. Nothing
// runs between turns.
func (a *adapter) Start(_ context.Context, ep runner.Epoch, j runner.Journal) (runner.Runtime, error) {
	if !filepath.IsAbs(ep.Workspace) {
		return nil, fmt.Errorf("%s runtime %q: workspace %q is not an absolute path", a.o.Kind, a.o.Name, ep.Workspace)
	}
	if j == nil {
		return nil, errors.New("provider runtime: no journal")
	}
	rt := &runtime{o: a.o, cli: a.cli, ep: ep, journal: j, exitGrace: exitGrace}
	// An id starting with a dash would read as a flag: no CLI makes one.
	if ep.Provider == a.o.Kind && !strings.HasPrefix(ep.ThreadID, "-") {
		rt.thread = ep.ThreadID
	}
	return rt, nil
}
