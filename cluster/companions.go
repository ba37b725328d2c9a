package cluster

import "github.com/fak-dev/fak/fsm/fsmpb"

// Companions. Some commands are always followed by another the leader
// itself proposes next — a move's restore by its cutover. Proposed after
// the first commits, the second costs a whole commit round more; proposed
// right behind it, in the same log entry, it costs nothing, and the FSM
// still applies them as two commands in order (a refused first one makes
// the second fail its own checks). The rule that decides what follows what
// belongs to its owner (the move controller), which installs it here.

// Companion is a command proposed right behind another, in its entry, and
// what to do with its result once the entry is applied (Done may be nil;
// it is not called when the entry did not commit).
type Companion struct {
	Cmd  *fsmpb.Command
	Done func(*fsmpb.Result)
}

// CompanionsFunc returns the companions of cmd (none: nil). It runs on the
// leader before cmd is proposed, after the leader stamped its time, and
// must return quickly.
type CompanionsFunc func(cmd *fsmpb.Command) []Companion

// SetCompanions installs the companions rule of this node's proposals
// (nil: none).
func (c *Cluster) SetCompanions(fn CompanionsFunc) {
	if fn == nil {
		c.applier.companions.Store(nil)
		return
	}
	c.applier.companions.Store(&fn)
}

func (a *applier) companionsOf(cmd *fsmpb.Command) []Companion {
	fn := a.companions.Load()
	if fn == nil {
		return nil
	}
	return (*fn)(cmd)
}
