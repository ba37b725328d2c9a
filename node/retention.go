package node

import (
	"context"
	"time"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Retention (--retain-stopped, retain_stopped in the config file): the
// leader purges the sessions stopped longer than the retention, in
// batches of one command each; the FSM purges only what is stopped and
// due at the command's time, and journals every purge in the audit log.
// The retention is the leader's: nodes should agree on it (a follower's
// value applies once it leads).
const (
	retentionInterval = time.Minute
	retentionTimeout  = 30 * time.Second
)

func (n *Node) retentionLoop(ctx context.Context) {
	t := time.NewTicker(retentionInterval)
	defer t.Stop()
	for {
		if n.cluster.IsLeader() {
			n.retain(ctx, time.Now())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// retain purges what is due at now, a batch at a time, and returns how
// many sessions it purged.
func (n *Node) retain(ctx context.Context, now time.Time) int {
	cutoff := now.Add(-n.cfg.RetainStopped).UnixNano()
	purged := 0
	for ctx.Err() == nil {
		ids, err := n.fsm.PurgeDue(cutoff, fsm.MaxPurgeBatch)
		if err != nil || len(ids) == 0 {
			if err != nil {
				n.logger.Warn("retention: reading stopped sessions", "error", err)
			}
			return purged
		}
		actx, cancel := context.WithTimeout(ctx, retentionTimeout)
		res, err := n.cluster.Apply(actx, &fsmpb.Command{RequestId: newReapID(), Body: &fsmpb.Command_PurgeSessions{PurgeSessions: &fsmpb.PurgeSessions{
			SessionIds: ids, Cause: fsm.PurgeCauseRetention, StoppedBeforeUnixNano: cutoff, By: n.cfg.Name,
		}}})
		cancel()
		if err == nil {
			err = fsm.ResultError(res)
		}
		if err != nil {
			n.logger.Warn("retention: purge not committed; the next pass tries again", "error", err)
			return purged
		}
		got := len(res.GetPurge().GetEntries())
		purged += got
		n.logger.Info("retention: purged stopped sessions", "sessions", got, "retain_stopped", n.cfg.RetainStopped)
		if got == 0 {
			return purged // all skipped: not due at the command's time
		}
	}
	return purged
}
