package fsm

import (
	"fmt"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// DefaultRuntimeAdapter runs a session when its placement names none.
const DefaultRuntimeAdapter = "echo"

// MaxPlacementFieldBytes bounds each member of a placement tuple.
const MaxPlacementFieldBytes = 128

func validPlacement(p *fsmpb.Placement) *Error {
	fields := [...]struct{ name, v string }{
		{"runtime adapter", p.RuntimeAdapter}, {"provider", p.Provider}, {"account ref", p.AccountRef},
		{"model", p.Model}, {"node", p.Node},
	}
	for _, f := range fields {
		if len(f.v) > MaxPlacementFieldBytes {
			return errorf(ReasonInvalidArgument, "placement %s longer than %d bytes", f.name, MaxPlacementFieldBytes)
		}
	}
	return nil
}

func epochText(epoch uint64, p *fsmpb.Placement) string {
	s := fmt.Sprintf("epoch %d: %s", epoch, p.RuntimeAdapter)
	if p.Model != "" {
		s += " " + p.Model
	}
	if p.Node != "" {
		s += " on " + p.Node
	}
	return s
}
