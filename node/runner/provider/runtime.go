package provider

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/proc"
)

// dialect is what differs between the three CLIs: how a turn is invoked
// and how its lines read.
type dialect interface {
	invoke(rt *runtime, p plan) (invocation, error)
	handler(rt *runtime, p plan) handler
}

// invocation is one turn's process, as a dialect builds it.
type invocation struct {
	args  []string // after Options.Command
	env   []string // the provider's variables, after the runtime block's
	drop  []string // runtime block variables that would bypass the gateway
	stdin bool     // a pipe (else /dev/null)
}

// handler reads one turn's lines. begin writes what the CLI reads first;
// line handles one line (a JSON object of that type) and sets the
// stream's end at the CLI's result.
type handler interface {
	begin(s *stream)
	line(s *stream, typ string, line []byte) error
}

// plan is what a turn asks of its process.
type plan struct {
	in     *fsmpb.Event
	prompt string // the input, after the journal's conversation on a new thread
	resume string // the thread resumed; "" starts a new one
}

// runtime serves one epoch. Its only state is the provider thread its
// turns resume: the thread itself lives in the CLI's own files.
type runtime struct {
	o         Options
	cli       dialect
	ep        runner.Epoch
	journal   runner.Journal
	thread    string // the thread the next turn resumes ("": a new one)
	exitGrace time.Duration
}

// MeteredByGateway: with a gateway, the model calls are charged there.
func (rt *runtime) MeteredByGateway() bool { return rt.o.Gateway != nil }

// MeteredByGateway: the adapter's runtimes are (the runner asks before
// one starts, to charge the turn without its query).
func (a *adapter) MeteredByGateway() bool { return a.o.Gateway != nil }

// SafePoint has nothing to do: between turns no process runs, and the
// thread is bound on the session by the turn that ran on it.
func (rt *runtime) SafePoint(context.Context) error { return nil }

// Stop has nothing to release: every turn's process group is gone when
// the turn returns.
func (rt *runtime) Stop() error { return nil }

// Turn runs the CLI once for the input. On cancellation it returns ctx's
// error once the process group is dead.
func (rt *runtime) Turn(ctx context.Context, in *fsmpb.Event, t runner.Turn) (runner.TurnResult, error) {
	return proc.TimedTurn(ctx, rt.o.TurnTimeout, ReasonTurnTimeout, func(tctx context.Context) (runner.TurnResult, error) {
		return rt.turn(ctx, tctx, in, t)
	})
}

// turn resumes the runtime's thread, or starts a new one whose first
// prompt carries the journal's conversation. A resume that dies before
// the CLI names the thread — the thread's files are not on this node (the
// session moved here) or were cleaned up — is retried once on a new
// thread: else every later turn would resume the lost thread and fail.
func (rt *runtime) turn(ctx, tctx context.Context, in *fsmpb.Event, t runner.Turn) (runner.TurnResult, error) {
	var lost string
	if rt.thread != "" {
		resumed := rt.thread
		res, s, err := rt.attempt(ctx, tctx, t, plan{in: in, prompt: in.Text, resume: resumed})
		if !s.stillborn(err) || tctx.Err() != nil {
			return res, err
		}
		rt.o.Logger.Warn("the provider thread could not be resumed; starting a new one with the journal's conversation",
			"session", rt.ep.SessionID, "provider", rt.o.Kind, "thread", resumed, "error", err)
		lost = resumed + ": " + err.Error()
		rt.thread = ""
	}
	prompt, turns, err := rt.newThreadPrompt(in)
	if err != nil {
		return runner.TurnResult{}, err
	}
	res, _, err := rt.attempt(ctx, tctx, t, plan{in: in, prompt: prompt})
	if err == nil {
		if turns > 0 {
			res.Facts["context_turns"] = turns
		}
		if lost != "" {
			res.Facts["resume_failed"] = runner.Truncate(lost, summaryBytes)
		}
	}
	return res, err
}

// attempt runs one process for the turn. The stream it returns (nil when
// none started) tells what the process got to.
func (rt *runtime) attempt(ctx, tctx context.Context, t runner.Turn, p plan) (runner.TurnResult, *stream, error) {
	inv, err := rt.cli.invoke(rt, p)
	if err != nil {
		return runner.TurnResult{}, nil, err
	}
	if p.resume != "" && rt.o.Kind == ProviderClaude {
		if dir, err := rt.stateDir(); err == nil {
			relocateClaudeThread(dir, rt.ep.Workspace, p.resume)
		}
	}
	// Deferred first, so it runs last: the group is dead before the
	// output left is journaled.
	out := runner.NewOutput(ctx, t)
	defer out.Close()
	pr, err := proc.Start(tctx, rt.spec(p.in, inv), proc.StartOptions{
		Stdin: inv.stdin, Reason: ReasonRuntimeStart,
		Hint: "install the CLI or name it in the runtime block's command",
	})
	if err != nil {
		return runner.TurnResult{}, nil, err
	}
	defer pr.Stop()
	s := &stream{
		rt: rt, ctx: ctx, tctx: tctx, t: t, pr: pr, out: out, lines: proc.NewLineReader(pr, maxLineBytes),
		resumed: p.resume,
	}
	res, err := s.run(rt.cli.handler(rt, p))
	if s.thread != "" {
		rt.thread = s.thread
	}
	return res, s, err
}

// spec is the turn's process: the CLI in the workspace, with a clean
// environment, the runtime block's variables, the provider's and fak's
// own (never a token).
func (rt *runtime) spec(in *fsmpb.Event, inv invocation) proc.Spec {
	var env []string
	if _, ok := os.LookupEnv("HOME"); !ok {
		env = append(env, "HOME="+rt.ep.Workspace)
	}
	if dir, err := rt.stateDir(); err == nil {
		// The CLI's threads live in the workspace and move with it.
		env = append(env, stateVar[rt.o.Kind]+"="+dir)
	}
	for _, kv := range rt.o.Env {
		if k, _, _ := strings.Cut(kv, "="); !containsKey(inv.drop, k) {
			env = append(env, kv)
		}
	}
	env = append(env, inv.env...)
	env = append(env, proc.TurnEnv(rt.ep, in.Seq)...)
	return proc.Spec{
		Argv:    append(append([]string(nil), rt.o.Command...), inv.args...),
		Dir:     rt.ep.Workspace,
		Env:     proc.Env(env...),
		Sandbox: rt.o.Sandbox,
		Hide:    rt.o.Hide,
		Groups:  rt.o.Groups,
	}
}

func containsKey(keys []string, k string) bool {
	for _, d := range keys {
		if d == k {
			return true
		}
	}
	return false
}
