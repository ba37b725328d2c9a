package node

import (
	"fmt"

	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/echo"
	"github.com/fak-dev/fak/node/runner/exec"
	"github.com/fak-dev/fak/node/runner/model"
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
			Sandbox: r.Sandbox, Hide: c.hiddenPaths(), Env: env,
		})
	case AdapterModel:
		retries := 0 // the adapter's default
		if r.MaxRetries != nil {
			retries = *r.MaxRetries
			if retries == 0 {
				retries = -1 // never
			}
		}
		return model.New(model.Options{
			Name: r.Name, Endpoint: r.Endpoint, Model: r.Model, AccountRef: r.AccountRef,
			ResolveKey: c.resolveKey, Tools: r.Tools, AutoApprove: r.Approve,
			Price:  model.Price{InputPerMTok: r.InputPerMTok, OutputPerMTok: r.OutputPerMTok},
			System: r.System, TurnTimeout: r.TurnTimeout, MaxRetries: retries,
			Sandbox: r.Sandbox, Hide: c.hiddenPaths(), Logger: c.Logger,
		})
	}
	return nil, fmt.Errorf("unknown adapter %q", r.Adapter)
}

// named serves an adapter under a runtime block's name.
type named struct {
	runner.Adapter
	name string
}

func (n named) Name() string { return n.name }
