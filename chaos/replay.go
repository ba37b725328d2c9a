package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// replayChecks asks every node for its replay-equivalence check
// (OperatorService.VerifyReplay): the live FSM must equal one rebuilt from
// the node's latest snapshot and its log, and one rebuilt from the log alone
// while the log starts at 1. A difference means Apply is not a function of
// the log (or the log changed under an applied entry): addresses handed out
// live could name other events after a restart. It returns a line per node
// and the problems found; a node that cannot be checked in time is a
// problem too.
func replayChecks(ctx context.Context, clients map[string]*nodeClient, nodes []string, when string) (lines, problems []string) {
	for _, n := range nodes {
		var check *fakv1.ReplayCheck
		var last error
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			resp, err := clients[n].operator.VerifyReplay(cctx, connect.NewRequest(&fakv1.VerifyReplayRequest{}))
			cancel()
			if err == nil && len(resp.Msg.GetNodes()) == 1 && resp.Msg.GetNodes()[0].GetError() == "" {
				check = resp.Msg.GetNodes()[0]
				break
			}
			last = err
			if err == nil {
				last = fmt.Errorf("%s", resp.Msg.GetNodes())
			}
			sleepCtx(ctx, time.Second)
		}
		if check == nil {
			problems = append(problems, fmt.Sprintf("%s %s: replay check not carried out: %v", when, n, last))
			continue
		}
		line := fmt.Sprintf("%s %s: live index %d", when, n, check.GetLiveIndex())
		for _, rb := range check.GetRebuilds() {
			verdict := "equal"
			if !rb.GetEqual() {
				verdict = fmt.Sprintf("DIFFERS (%v)", rb.GetDifferences())
			}
			line += fmt.Sprintf("; %s (%d entries) %s", rb.GetSource(), rb.GetEntries(), verdict)
		}
		if s := check.GetLogOnlySkipped(); s != "" {
			line += "; log alone: " + s
		}
		lines = append(lines, line)
		if !check.GetEqual() {
			problems = append(problems, line)
		}
	}
	slices.Sort(problems)
	return lines, problems
}
