package cluster

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Leave removes this node from the fleet gracefully: a leader removes itself
// from the Raft configuration (and steps down); a follower announces its
// departure in gossip and waits for the leader's reconcile loop to remove
// it. Gossip is left last. The caller shuts the node down afterwards.
func (c *Cluster) Leave(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	id := raft.ServerID(c.cfg.Name)
	if c.raft.State() == raft.Leader {
		if err := c.raft.RemoveServer(id, 0, timeout).Error(); err != nil {
			return fmt.Errorf("remove self from raft: %w", err)
		}
	} else {
		if err := c.gossip.leave(timeout); err != nil {
			return fmt.Errorf("leave gossip: %w", err)
		}
		left := time.Now()
		for time.Now().Before(deadline) {
			in, err := c.inConfiguration(id)
			if err == nil && !in {
				return nil
			}
			if c.removedUnseen(left) {
				c.logger.Warn("left without seeing the configuration entry that removed this node: the leader stopped contacting it after it left gossip")
				return nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return fmt.Errorf("%w within %s", ErrStillInConfiguration, timeout)
	}
	return c.gossip.leave(time.Until(deadline))
}

// removedUnseen reports whether the leader has stopped contacting this
// follower since it left gossip. hashicorp/raft sends a removed server the
// entries up to its removal once, then stops replicating to it, heartbeats
// included, so when that one send is lost the node never sees its own
// removal (Consul's leave then only warns). A leader that still has the
// node in its configuration heartbeats it every few tens of milliseconds;
// silence for removedSilence means it removed the node, or is itself gone
// (in which case the leave goes ahead as Consul's does).
func (c *Cluster) removedUnseen(leftGossip time.Time) bool {
	last := c.raft.LastContact()
	return time.Since(leftGossip) > removedSilence && time.Since(last) > removedSilence
}

// removedSilence: several heartbeat timeouts without a word from the leader.
const removedSilence = 4 * HeartbeatTimeout

func (c *Cluster) inConfiguration(id raft.ServerID) (bool, error) {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return false, err
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == id {
			return true, nil
		}
	}
	return false, nil
}
