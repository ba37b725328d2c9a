package proc

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/fak-dev/fak/node/runner"
)

// errTurnTimeout is the cause of a turn context that ran out of time.
var errTurnTimeout = errors.New("turn timeout")

// TimedTurn runs a turn whose processes run under tctx: ctx bounded by
// timeout. The turn must return only once its process group is dead.
// When ctx ended (an interrupt, a retired epoch, shutdown) it returns
// ctx's error; when the timeout did, a runner.TurnError with reason (each
// runtime names its own); else what the turn returned.
func TimedTurn(ctx context.Context, timeout time.Duration, reason string,
	turn func(tctx context.Context) (runner.TurnResult, error)) (runner.TurnResult, error) {
	tctx, cancel := context.WithTimeoutCause(ctx, timeout, errTurnTimeout)
	defer cancel()
	res, err := turn(tctx)
	switch {
	case ctx.Err() != nil:
		return runner.TurnResult{}, ctx.Err()
	case errors.Is(context.Cause(tctx), errTurnTimeout):
		return runner.TurnResult{}, runner.Failf(reason,
			"the turn ran past its timeout of %s; its process group was killed", timeout)
	}
	return res, err
}

// TurnEnv is fak's own variables for a turn's process: the session, epoch
// and input it serves, the node's address and the workspace. Never a
// token.
func TurnEnv(ep runner.Epoch, inputSeq uint64) []string {
	return []string{
		"FAK_SESSION_ID=" + ep.SessionID,
		"FAK_EPOCH=" + strconv.FormatUint(ep.Epoch, 10),
		"FAK_INPUT_SEQ=" + strconv.FormatUint(inputSeq, 10),
		"FAK_ADDR=" + ep.Addr,
		"FAK_WORKSPACE=" + ep.Workspace,
	}
}
