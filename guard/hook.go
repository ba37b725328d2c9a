package guard

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// The hook side: `fak guard-sessionstart` and `fak guard-sessionend`, run
// by the provider with its hook JSON on stdin. It is fail-open: whatever
// goes wrong (no guard, wrong token, guard or cluster unreachable, malformed
// JSON, unknown source, no answer within hookTimeout) it prints one line of
// at most maxStderrLine bytes to stderr and exits 0, so the provider is never
// wedged; the old session stays in force. On success it prints nothing
// (Claude Code would inject SessionStart stdout as model context).

// Environment a guard hands its child (and so the child's hooks).
const (
	EnvSocket   = "FAK_GUARD_SOCKET"
	EnvToken    = "FAK_GUARD_TOKEN"
	EnvSession  = "FAK_SESSION_ID"
	EnvLaunch   = "FAK_LAUNCH_ID"
	EnvAddr     = "FAK_ADDR"
	maxHookJSON = 1 << 20
	// maxStderrLine bounds the one line a failing hook prints, newline
	// included.
	maxStderrLine = 200
)

// hookTimeout bounds a hook from reading stdin to the guard's reply (a var
// so tests can shorten it). EnvHookTimeout overrides it, for the hook and
// for the guard's cluster call inside it.
var hookTimeout = 2 * time.Second

// EnvHookTimeout, a Go duration, replaces the 2 s hook budget (slow
// machines, tests under load).
const EnvHookTimeout = "FAK_GUARD_HOOK_TIMEOUT"

// HookBudget is the hook's time budget under getenv.
func HookBudget(getenv func(string) string) time.Duration {
	if d, err := time.ParseDuration(getenv(EnvHookTimeout)); err == nil && d > 0 {
		return d
	}
	return hookTimeout
}

// HookCommandName is the fak subcommand for a hook event.
func HookCommandName(event string) string {
	if event == EventSessionEnd {
		return "guard-sessionend"
	}
	return "guard-sessionstart"
}

// RunHook runs `fak guard-sessionstart` (event session_start) or `fak
// guard-sessionend` (session_end) with args (--provider NAME). It always
// returns exit code 0.
func RunHook(event string, args []string, stdin io.Reader, stderr io.Writer, getenv func(string) string) int {
	name := "fak " + HookCommandName(event)
	fail := func(format string, a ...any) int {
		failLine(stderr, name, fmt.Sprintf(format, a...))
		return 0
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	provider := fs.String("provider", "", "provider `NAME` (claude, codex, gemini or a harness's own)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "Usage: %s --provider NAME < HOOK_JSON\n\n%s\n", name, hookHelp)
			return 0
		}
		return fail("%v", err)
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q", clip(fs.Arg(0), 40))
	}

	budget := HookBudget(getenv)
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	raw, err := readAllCtx(ctx, stdin, maxHookJSON)
	if err != nil {
		return fail("reading the hook JSON: %v", timeoutText(err, budget))
	}
	if _, err := ParseHook(event, raw); err != nil {
		return fail("%v", err)
	}
	socket, token := getenv(EnvSocket), getenv(EnvToken)
	if socket == "" {
		return fail("not running under fak guard (%s is unset)", EnvSocket)
	}
	reply, err := Call(ctx, socket, Request{Token: token, Event: event, Provider: *provider, Payload: raw})
	if err != nil {
		return fail("guard unreachable: %v", timeoutText(err, budget))
	}
	if !reply.OK {
		return fail("%s", reply.Error)
	}
	return 0
}

const hookHelp = `Reads one provider hook JSON object on stdin (source, or reason for
guard-sessionend, and one of session_id, thread_id, conversation_id) and
reports it to the enclosing fak guard over $FAK_GUARD_SOCKET. Fail-open:
on any error it prints one line to stderr and exits 0.`

// failLine writes one line of at most maxStderrLine bytes.
func failLine(w io.Writer, name, msg string) {
	msg = strings.Join(strings.Fields(msg), " ")
	line := name + ": " + msg + " (fail-open: the fak session is unchanged)"
	if len(line) > maxStderrLine-1 {
		line = clip(line, maxStderrLine-4) + "..."
	}
	io.WriteString(w, line+"\n")
}

func timeoutText(err error, budget time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", budget)
	}
	return err.Error()
}

// readAllCtx reads r to its end (at most max bytes) unless ctx ends first.
func readAllCtx(ctx context.Context, r io.Reader, max int) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
		done <- result{b, err}
	}()
	select {
	case res := <-done:
		if res.err == nil && len(res.b) > max {
			res.err = fmt.Errorf("larger than %d bytes", max)
		}
		return res.b, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
