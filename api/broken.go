package api

import (
	"context"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// brokenApply is nil in every real build. Builds with a fakbug_* tag set
// it to a deliberately wrong write path, so the chaos harness can show that
// its checkers catch that class of bug (api/DESIGN.md, chaos/README.md).
var brokenApply func(s *Server, ctx context.Context, cmd *fsmpb.Command) (res *fsmpb.Result, err error, handled bool)
