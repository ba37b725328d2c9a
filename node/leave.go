package node

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/cluster"
)

// leave leaves the cluster and, when this node's own replica still lists
// it (a removed follower may never hear of its removal: the leader stops
// replicating to it), asks the leader whether it did remove it.
func (n *Node) leave() error {
	err := n.cluster.Leave(leaveTimeout)
	if !errors.Is(err, cluster.ErrStillInConfiguration) {
		return err
	}
	addr := n.cluster.Status().LeaderAPIAddr
	if addr == "" {
		return err
	}
	hc, base, opts := nodeClient(addr, n.token.get, n.peerTLS)
	cl := fakv1connect.NewClusterServiceClient(hc, base, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		resp, rerr := cl.RaftPeers(ctx, connect.NewRequest(&fakv1.RaftPeersRequest{}))
		if rerr == nil {
			removed := true
			for _, p := range resp.Msg.Peers {
				removed = removed && p.Id != n.cfg.Name
			}
			if removed {
				return nil
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return err
}
