package node

import (
	"fmt"

	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/echo"
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
	}
	return nil, fmt.Errorf("unknown adapter %q", r.Adapter)
}

// named serves an adapter under a runtime block's name.
type named struct {
	runner.Adapter
	name string
}

func (n named) Name() string { return n.name }
