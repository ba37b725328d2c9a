package cluster

import (
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fak-dev/fak/fsm"
)

// reconcileInterval is how often the leader compares gossip membership with
// the Raft configuration even when no gossip event arrived.
const reconcileInterval = time.Second

// barrierTimeout bounds enqueueing the new leader's barrier entry.
const barrierTimeout = 30 * time.Second

// monitorLeadership follows the buffered NotifyCh (LeaderCh can drop
// transitions) and runs the leader loop while this node leads.
func (c *Cluster) monitorLeadership() {
	defer c.wg.Done()
	var stopLeader chan struct{}
	var leaderDone chan struct{}
	stop := func() {
		if stopLeader != nil {
			close(stopLeader)
			<-leaderDone
			stopLeader, leaderDone = nil, nil
		}
	}
	for {
		select {
		case <-c.shutdownCh:
			stop()
			return
		case isLeader := <-c.notifyCh:
			if isLeader {
				if stopLeader == nil {
					stopLeader, leaderDone = make(chan struct{}), make(chan struct{})
					go func(stopCh, done chan struct{}) {
						defer close(done)
						c.leaderLoop(stopCh)
					}(stopLeader, leaderDone)
				}
			} else {
				c.ready.Store(false)
				stop()
			}
		}
	}
}

// leaderLoop: first commit an empty fak entry and wait until the FSM has
// applied it. That is the barrier (the FSM now reflects everything earlier
// leaders committed) and, unlike raft.Barrier or the election no-op, it is an
// entry the FSM sees, so every commit index this leader hands out as a read
// index is one the followers' FSMs will report as applied. Then reconcile
// membership until leadership ends.
func (c *Cluster) leaderLoop(stopCh chan struct{}) {
	defer c.ready.Store(false)
	c.logger.Info("acquired leadership; committing barrier entry")
	barrier, err := fsm.EncodeBatch(nil)
	if err != nil {
		panic(err)
	}
	for {
		if err := awaitFuture(c.raft.Apply(barrier, barrierTimeout), c.raftDown); err == nil {
			break
		} else {
			c.logger.Warn("barrier failed", "error", err)
		}
		select {
		case <-stopCh:
			return
		case <-time.After(100 * time.Millisecond):
		}
		if c.raft.State() != raft.Leader {
			return
		}
	}
	c.ready.Store(true)
	c.logger.Info("leader ready", "term", c.raft.CurrentTerm())
	nudged := make(chan struct{})
	defer func() { <-nudged }()
	go func() {
		defer close(nudged)
		c.nudgeLoop(stopCh)
	}()
	ticker := time.NewTicker(reconcileInterval)
	defer ticker.Stop()
	missing := make(map[raft.ServerID]time.Time)
	for {
		c.reconcile(missing)
		select {
		case <-stopCh:
			return
		case <-c.shutdownCh:
			return
		case <-ticker.C:
		case <-c.gossip.events:
		}
	}
}

// reconcile makes the Raft configuration follow gossip: alive servers not in
// the configuration are added; servers that left are removed; servers dead
// (or never seen by this leader) for longer than the grace period are
// removed while the remaining voters keep a quorum. Only the leader runs it,
// never a gossip callback.
func (c *Cluster) reconcile(missing map[raft.ServerID]time.Time) {
	future := c.raft.GetConfiguration()
	if err := future.Error(); err != nil {
		c.logger.Warn("reconcile: get configuration", "error", err)
		return
	}
	servers := future.Configuration().Servers
	inConfig := make(map[raft.ServerID]raft.Server, len(servers))
	voters := 0
	for _, s := range servers {
		inConfig[s.ID] = s
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	members := c.gossip.Members()
	byName := make(map[raft.ServerID]Member, len(members))
	for _, m := range members {
		byName[raft.ServerID(m.Name)] = m
	}

	// Add alive members.
	for _, m := range members {
		id := raft.ServerID(m.Name)
		if m.Status != StatusAlive || m.Meta.RaftAddr == "" {
			continue
		}
		addr := raft.ServerAddress(m.Meta.RaftAddr)
		if s, ok := inConfig[id]; ok {
			if s.Address == addr {
				continue
			}
		}
		if err := c.verifyRaftPeer(string(addr)); err != nil {
			c.logger.Warn("reconcile: not adding a server whose raft identity fails verification", "server", id, "error", err)
			continue
		}
		var f raft.IndexFuture
		if m.Meta.Voter {
			f = c.raft.AddVoter(id, addr, 0, raftTimeout)
		} else {
			f = c.raft.AddNonvoter(id, addr, 0, raftTimeout)
		}
		if err := f.Error(); err != nil {
			c.logger.Warn("reconcile: add server", "server", id, "error", err)
			return
		}
		c.logger.Info("added server to raft", "server", id, "address", addr, "voter", m.Meta.Voter)
	}

	// Remove servers that left, and servers gone longer than the grace.
	ids := make([]raft.ServerID, 0, len(servers))
	for _, s := range servers {
		ids = append(ids, s.ID)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	now := time.Now()
	for _, id := range ids {
		if string(id) == c.cfg.Name {
			continue
		}
		m, seen := byName[id]
		var gone time.Time
		switch {
		case seen && m.Status == StatusLeft:
			c.removeServer(id, "left")
			delete(missing, id)
			continue
		case seen && m.Status == StatusAlive:
			delete(missing, id)
			continue
		case seen && m.Status == StatusDead:
			gone = m.Since
		default: // in the configuration but never seen in gossip
			if _, ok := missing[id]; !ok {
				missing[id] = now
			}
			gone = missing[id]
		}
		if now.Sub(gone) < c.cfg.DeadServerGrace {
			continue
		}
		if inConfig[id].Suffrage == raft.Voter {
			// Removing a voter must leave a configuration whose healthy
			// voters still form a majority of it.
			healthy := 0
			for _, s := range servers {
				if s.Suffrage == raft.Voter && (string(s.ID) == c.cfg.Name || byName[s.ID].Status == StatusAlive) {
					healthy++
				}
			}
			if healthy <= (voters-1)/2 {
				c.logger.Warn("not removing dead server: quorum would be at risk", "server", id)
				continue
			}
			voters--
		}
		c.removeServer(id, "dead for longer than the grace period")
		delete(missing, id)
	}
}

func (c *Cluster) removeServer(id raft.ServerID, why string) {
	if err := c.raft.RemoveServer(id, 0, raftTimeout).Error(); err != nil {
		c.logger.Warn("reconcile: remove server", "server", id, "error", err)
		return
	}
	c.logger.Info("removed server from raft", "server", id, "reason", why)
}
