package model

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/fak-dev/fak/node/runner/proc"
)

// shell runs a command with sh -c in the workspace, in its own process
// group with a clean environment (and the runtime's sandbox): nothing it
// starts outlives the call, and no secret of the node is in its
// environment. Its output is capped; ShellTimeout bounds it.
func (ts *tools) shell(ctx context.Context, command string) (toolResult, error) {
	sctx, cancel := context.WithTimeout(ctx, ShellTimeout)
	defer cancel()
	p, err := proc.Command(sctx, proc.Spec{
		Argv:    []string{"sh", "-c", command},
		Dir:     ts.workspace,
		Env:     proc.Env(ts.env...),
		Sandbox: ts.sandbox,
		Hide:    ts.hide,
		Groups:  ts.groups,
	})
	if err != nil {
		return toolResult{text: "error: " + err.Error(), ran: true}, nil
	}
	out := newCapWriter(ts.maxOutput)
	p.Cmd.Stdout, p.Cmd.Stderr = out, out
	if err := p.Start(); err != nil {
		return toolResult{text: "error: " + err.Error(), ran: true}, nil
	}
	err = p.Wait()
	if ctx.Err() != nil {
		return toolResult{}, context.Cause(ctx)
	}
	res := toolResult{text: out.String(), ran: true}
	var exit *exec.ExitError
	var status string
	switch {
	case sctx.Err() != nil:
		status = fmt.Sprintf("[killed: the command ran longer than %s]", ShellTimeout)
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		status = fmt.Sprintf("[exit status %d]", exit.ExitCode())
	case err != nil:
		status = "[" + err.Error() + "]"
	default:
		res.ok = true
	}
	switch {
	case status != "" && res.text != "" && !strings.HasSuffix(res.text, "\n"):
		res.text += "\n" + status
	case status != "":
		res.text += status
	case res.text == "":
		res.text = "(no output)"
	}
	return res, nil
}
