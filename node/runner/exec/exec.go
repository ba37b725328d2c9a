// Package exec is the runtime adapter that runs any program as a session's
// agent: one process per turn, started in the session's workspace in its
// own process group, with a clean environment and optionally inside a
// bubblewrap sandbox. Two protocols: "text" (the input on stdin, stdout
// streamed as output, the exit status decides) and "jsonl", fak runtime
// protocol v1 (docs/runtime-protocol.md): a turn line in, output, tool
// calls and results, approval requests, usage and done out.
//
// No process of a turn outlives it: cancelling the turn (an interrupt, the
// epoch retired by a move or reset, the node shutting down), the turn
// timeout, a protocol error and the end of the turn all kill the whole
// group.
package exec

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/proc"
)

// Protocols a runtime block may name.
const (
	ProtocolText  = "text"
	ProtocolJSONL = "jsonl"
)

// DefaultTurnTimeout bounds a turn unless the runtime block says otherwise.
const DefaultTurnTimeout = 30 * time.Minute

// Reasons a turn fails with, beyond the fsm's own (BUDGET_EXHAUSTED).
const (
	ReasonExitStatus      = "EXIT_STATUS"
	ReasonRuntimeProtocol = "RUNTIME_PROTOCOL"
	ReasonTurnTimeout     = "TURN_TIMEOUT"
	ReasonExecStart       = "EXEC_START"
)

// exitGrace is how long a process may take to exit once it has written
// done (jsonl) or closed its stdout without it, before its group is
// killed.
const exitGrace = 10 * time.Second

// Options configure one exec runtime: a runtime block of the node's
// configuration.
type Options struct {
	// Name is the runtime's name, which placements use ("shell-agent").
	Name string
	// Command is the argv run for each turn.
	Command []string
	// Protocol is ProtocolText (the default) or ProtocolJSONL.
	Protocol string
	// TurnTimeout bounds a turn, waiting for approvals included (0:
	// DefaultTurnTimeout).
	TurnTimeout time.Duration
	// Sandbox is "", proc.SandboxNone or proc.SandboxBwrap.
	Sandbox string
	// Hide lists paths the sandbox makes invisible: the node's data dir,
	// its tokens file, TLS keys.
	Hide []string
	// Groups records each turn's process group so it dies with the node
	// (proc.Spec.Groups).
	Groups *proc.Groups
	// Env is the KEY=VALUE pairs the runtime block hands over (an account
	// key, say); nothing else of the node's environment reaches the
	// process beyond proc.Env's pass-through (PATH, HOME, locale).
	Env []string
}

// New validates o and returns the adapter. A bad runtime block is refused
// here, so the node stops at start rather than failing every turn.
func New(o Options) (runner.Adapter, error) {
	if o.Name == "" {
		return nil, errors.New("exec runtime: no name")
	}
	if len(o.Command) == 0 || o.Command[0] == "" {
		return nil, fmt.Errorf("exec runtime %q: no command (write command = [\"/path/to/agent\", \"args\"...])", o.Name)
	}
	switch o.Protocol {
	case "":
		o.Protocol = ProtocolText
	case ProtocolText, ProtocolJSONL:
	default:
		return nil, fmt.Errorf("exec runtime %q: unknown protocol %q (write %q or %q)", o.Name, o.Protocol, ProtocolText, ProtocolJSONL)
	}
	switch {
	case o.TurnTimeout < 0:
		return nil, fmt.Errorf("exec runtime %q: negative turn_timeout %s", o.Name, o.TurnTimeout)
	case o.TurnTimeout == 0:
		o.TurnTimeout = DefaultTurnTimeout
	}
	if err := proc.CheckSandbox(o.Sandbox); err != nil {
		return nil, fmt.Errorf("exec runtime %q: %w", o.Name, err)
	}
	for _, kv := range o.Env {
		k, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || k == "":
			return nil, fmt.Errorf("exec runtime %q: env entry %q is not KEY=VALUE", o.Name, kv)
		case strings.HasPrefix(k, "FAK_"):
			// fak sets its own FAK_ variables and never hands over a token.
			return nil, fmt.Errorf("exec runtime %q: env %s: the FAK_ names are fak's own", o.Name, k)
		}
	}
	o.Command = append([]string(nil), o.Command...)
	o.Hide = append([]string(nil), o.Hide...)
	o.Env = append([]string(nil), o.Env...)
	return &adapter{o: o}, nil
}

type adapter struct{ o Options }

func (a *adapter) Name() string { return a.o.Name }

// Start keeps the journal: a jsonl turn hands the process its context, read
// from it. Nothing runs between turns.
func (a *adapter) Start(_ context.Context, ep runner.Epoch, j runner.Journal) (runner.Runtime, error) {
	if !filepath.IsAbs(ep.Workspace) {
		return nil, fmt.Errorf("exec runtime %q: workspace %q is not an absolute path", a.o.Name, ep.Workspace)
	}
	return &runtime{o: a.o, ep: ep, history: newContextReader(j, ep.ResetSeq), exitGrace: exitGrace}, nil
}

// runtime serves one epoch. Its only state is the context read so far.
type runtime struct {
	o         Options
	ep        runner.Epoch
	history   contextReader
	exitGrace time.Duration
}

// SafePoint has nothing to do: between turns no process runs, and the
// workspace stays where a successor on this node finds it.
func (rt *runtime) SafePoint(context.Context) error { return nil }

// Stop has nothing to release: every turn's process group is gone when the
// turn returns.
func (rt *runtime) Stop() error { return nil }

// Turn runs the command once for the input. On cancellation it returns
// ctx's error once the process group is dead.
func (rt *runtime) Turn(ctx context.Context, in *fsmpb.Event, t runner.Turn) (runner.TurnResult, error) {
	return proc.TimedTurn(ctx, rt.o.TurnTimeout, ReasonTurnTimeout, func(tctx context.Context) (runner.TurnResult, error) {
		if rt.o.Protocol == ProtocolJSONL {
			return rt.jsonlTurn(ctx, tctx, in, t)
		}
		return rt.textTurn(ctx, tctx, in, t)
	})
}

// startProcess starts the turn's process, its stdin a pipe; one that
// cannot start fails the turn with EXEC_START.
func startProcess(ctx context.Context, s proc.Spec) (*proc.Piped, error) {
	return proc.Start(ctx, s, proc.StartOptions{Stdin: true, Reason: ReasonExecStart})
}

// spec describes the turn's process: the command in the workspace, with
// the runtime block's env and fak's own variables (never a token).
func (rt *runtime) spec(in *fsmpb.Event) proc.Spec {
	env := append(append([]string(nil), rt.o.Env...), proc.TurnEnv(rt.ep, in.Seq)...)
	return proc.Spec{
		Argv:    rt.o.Command,
		Dir:     rt.ep.Workspace,
		Env:     proc.Env(env...),
		Sandbox: rt.o.Sandbox,
		Hide:    rt.o.Hide,
		Groups:  rt.o.Groups,
	}
}
