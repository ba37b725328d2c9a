package cluster

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// continueKept decides how Raft starts when the FSM kept its database from
// a clean shutdown (fsm/kept.go). Raft restores its latest snapshot on
// start and replays the log after it; over a kept database that restore is
// wasted work (the database is already past it), so Raft is told to skip
// it and replays from the snapshot's index, the FSM ignoring what it
// applied before. That holds only while the log covers everything after
// the kept index and the snapshot is not newer than it: otherwise the
// kept database is discarded and the node rebuilds as after a crash.
func (c *Cluster) continueKept(rc *raft.Config, logs raft.LogStore, snaps raft.SnapshotStore) error {
	if c.fsm == nil {
		return nil
	}
	kept := c.fsm.Kept()
	if kept == 0 {
		return nil
	}
	last, err := logs.LastIndex()
	if err != nil {
		return fmt.Errorf("read the raft log: %w", err)
	}
	var snapIndex uint64
	list, err := snaps.List()
	if err != nil {
		return fmt.Errorf("list raft snapshots: %w", err)
	}
	if len(list) > 0 {
		snapIndex = list[0].Index
	}
	why := ""
	switch {
	case kept > last && kept > snapIndex:
		why = fmt.Sprintf("the raft log ends at %d, before the index the database applied (%d)", last, kept)
	case snapIndex > kept:
		why = fmt.Sprintf("the raft snapshot (index %d) is newer than the database (%d)", snapIndex, kept)
	}
	if why != "" {
		return c.fsm.Discard(why)
	}
	rc.NoSnapshotRestoreOnStart = true
	c.logger.Info("continuing from the FSM database kept at shutdown; replaying only the log after it",
		"applied", kept, "snapshot", snapIndex, "last_log", last)
	return nil
}
