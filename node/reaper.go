package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Expiry is decided by the FSM against leader-stamped command time, but a
// lapsed lease or attachment only changes state when a command says so. The
// reaper, on the leader, turns each lapse into a command, so every expiry
// becomes a visible journal event (lease.released, attachment.left with
// reason "expired"). The FSM re-checks the lapse at the command's time, so
// a keep-alive racing the reaper wins.
const (
	reapInterval = time.Second
	reapBatch    = 256
	reapTimeout  = 5 * time.Second
)

func (n *Node) reapLoop(ctx context.Context) {
	t := time.NewTicker(reapInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n.cluster.IsLeader() {
			n.reap(ctx)
		}
	}
}

func (n *Node) reap(ctx context.Context) {
	leases, attachments, err := n.fsm.Lapsed(time.Now().UnixNano(), reapBatch)
	if err != nil {
		n.logger.Warn("reaper: reading lapsed leases and attachments", "error", err)
		return
	}
	var cmds []*fsmpb.Command
	for _, id := range leases {
		cmds = append(cmds, &fsmpb.Command{Body: &fsmpb.Command_ReleaseLease{ReleaseLease: &fsmpb.ReleaseLease{
			SessionId: id, Reason: fsm.LeaseExpired,
		}}})
	}
	for _, at := range attachments {
		cmds = append(cmds, &fsmpb.Command{Body: &fsmpb.Command_Detach{Detach: &fsmpb.Detach{
			SessionId: at.SessionId, AttachmentId: at.AttachmentId, Reason: fsm.DetachExpired,
		}}})
	}
	for _, cmd := range cmds {
		cmd.RequestId = newReapID()
		actx, cancel := context.WithTimeout(ctx, reapTimeout)
		res, err := n.cluster.Apply(actx, cmd)
		cancel()
		if err != nil {
			// Lost leadership or shutting down: the next leader's reaper
			// finds the same lapses.
			n.logger.Debug("reaper: apply", "error", err)
			return
		}
		if err := fsm.ResultError(res); err != nil {
			n.logger.Warn("reaper: command refused", "error", err)
		}
	}
}

// newReapID is a reaper command's idempotency key. A command whose outcome
// was lost is not retried under it: the next round re-reads the lapses.
func newReapID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "reap_" + hex.EncodeToString(b[:])
}
