package cluster

import (
	"sort"
	"time"

	"github.com/hashicorp/raft"
)

const bootstrapPoll = 200 * time.Millisecond

// bootstrapLoop forms a new cluster exactly once when BootstrapExpect
// servers with the same expectation see each other in gossip, and no member
// reports existing Raft state. Every expecting server computes the same
// configuration (sorted by name), so concurrent bootstraps agree.
func (c *Cluster) bootstrapLoop(hasState bool) {
	defer c.wg.Done()
	if hasState {
		return
	}
	expect := c.cfg.BootstrapExpect
	ticker := time.NewTicker(bootstrapPoll)
	defer ticker.Stop()
	for {
		select {
		case <-c.shutdownCh:
			return
		case <-ticker.C:
		}
		if c.raft.LastIndex() > 0 {
			// Added to an existing cluster by its leader.
			c.gossip.setBootstrapped()
			return
		}
		if expect == 0 || !c.cfg.Voter {
			continue
		}
		var servers []raft.Server
		abort := false
		for _, m := range c.gossip.Members() {
			if m.Status != StatusAlive {
				continue
			}
			if m.Meta.Bootstrapped {
				// A cluster already exists; wait to be added to it.
				abort = true
				break
			}
			if !m.Meta.Voter {
				continue
			}
			if m.Meta.Expect != 0 && m.Meta.Expect != expect {
				c.logger.Error("members disagree on bootstrap-expect; not bootstrapping",
					"member", m.Name, "theirs", m.Meta.Expect, "ours", expect)
				abort = true
				break
			}
			servers = append(servers, raft.Server{
				ID: raft.ServerID(m.Name), Address: raft.ServerAddress(m.Meta.RaftAddr), Suffrage: raft.Voter,
			})
		}
		if abort || len(servers) < expect {
			continue
		}
		sort.Slice(servers, func(i, j int) bool { return servers[i].ID < servers[j].ID })
		c.logger.Info("bootstrapping cluster", "servers", len(servers))
		err := c.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
		if err != nil && err != raft.ErrCantBootstrap {
			c.logger.Error("bootstrap failed", "error", err)
			continue
		}
		c.gossip.setBootstrapped()
		return
	}
}
