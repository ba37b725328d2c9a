package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Operator changes to the Raft configuration. Both run on the leader.

// transferWait bounds how long TransferLeadership waits to learn the new
// leader after Raft reports the transfer done.
const transferWait = 10 * time.Second

var (
	// ErrPeerNotFound: no such server in the Raft configuration (or, for a
	// leadership transfer, no such voter).
	ErrPeerNotFound = errors.New("not in the raft configuration")
	// ErrStillInConfiguration: a leaving follower's own replica still
	// lists it. The leader may have removed it all the same: raft stops
	// replicating to a removed server, which then never learns of its
	// removal (ask the leader).
	ErrStillInConfiguration = errors.New("this node is still in its own copy of the raft configuration")
	// ErrRemoveLeader: the leader cannot remove itself by hand.
	ErrRemoveLeader = errors.New("cannot remove the leader; transfer leadership first (fakctl operator raft transfer-leader) or make it leave (fakctl cluster leave)")
	// ErrPeerAlive: the server is alive in gossip, so the leader would add
	// it straight back.
	ErrPeerAlive = errors.New("server is alive in gossip and would be added back; stop it first, or make it leave (fakctl cluster leave)")
)

// RemovePeer removes server id from the Raft configuration: for a server
// gone for good, before the dead-server grace removes it by itself.
func (c *Cluster) RemovePeer(id string) error {
	if !c.IsLeader() {
		return ErrNotLeader
	}
	if _, ok, err := c.configured(raft.ServerID(id)); err != nil {
		return mapRaftError(err)
	} else if !ok {
		return fmt.Errorf("server %q: %w", id, ErrPeerNotFound)
	}
	if id == c.cfg.Name {
		return fmt.Errorf("server %q is the leader: %w", id, ErrRemoveLeader)
	}
	if m, ok := c.gossip.member(id); ok && m.Status == StatusAlive {
		return fmt.Errorf("server %q: %w", id, ErrPeerAlive)
	}
	if err := c.raft.RemoveServer(raft.ServerID(id), 0, raftTimeout).Error(); err != nil {
		return fmt.Errorf("remove server %q: %w", id, mapRaftError(err))
	}
	c.logger.Info("removed server from raft", "server", id, "reason", "operator")
	return nil
}

// TransferLeadership hands leadership to voter to ("": a voter Raft picks)
// and returns the new leader once this node knows it. Transferring to the
// current leader is a no-op.
func (c *Cluster) TransferLeadership(ctx context.Context, to string) (string, error) {
	if !c.IsLeader() {
		return "", ErrNotLeader
	}
	var future raft.Future
	if to == "" {
		future = c.raft.LeadershipTransfer()
	} else {
		s, ok, err := c.configured(raft.ServerID(to))
		if err != nil {
			return "", mapRaftError(err)
		}
		if !ok || s.Suffrage != raft.Voter {
			return "", fmt.Errorf("voter %q: %w", to, ErrPeerNotFound)
		}
		if to == c.cfg.Name {
			return to, nil
		}
		future = c.raft.LeadershipTransferToServer(s.ID, s.Address)
	}
	if err := awaitFuture(future, c.raftDown); err != nil {
		return "", fmt.Errorf("transfer leadership: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, transferWait)
	defer cancel()
	for {
		if _, id := c.raft.LeaderWithID(); id != "" && string(id) != c.cfg.Name {
			c.logger.Info("transferred leadership", "to", id)
			return string(id), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("leadership transferred, but no new leader known within %s", transferWait)
		case <-c.shutdownCh:
			return "", ErrShutdown
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// configured returns server id's entry in the Raft configuration.
func (c *Cluster) configured(id raft.ServerID) (raft.Server, bool, error) {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Server{}, false, err
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == id {
			return s, true, nil
		}
	}
	return raft.Server{}, false, nil
}
