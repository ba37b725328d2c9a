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
		for time.Now().Before(deadline) {
			in, err := c.inConfiguration(id)
			if err == nil && !in {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if in, _ := c.inConfiguration(id); in {
			return fmt.Errorf("%w within %s", ErrStillInConfiguration, timeout)
		}
		return nil
	}
	return c.gossip.leave(time.Until(deadline))
}

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
