package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fak-dev/fak/cluster/snapshotfile"
	"github.com/fak-dev/fak/fsm"
)

// Backups. SaveSnapshot asks Raft for a fresh snapshot of the FSM (a
// consistent bbolt copy at one log index), spools it beside the data dir to
// hash and count it, then writes it as a snapshot file. RestoreSnapshot
// verifies a snapshot file completely, and the state inside it, before Raft
// ever sees it: Raft installs a user snapshot by restoring the FSM and
// panics if that fails, so nothing unverified may reach it.

// restoreTimeout bounds handing a restore to Raft and waiting for the fleet
// to acknowledge the entry that follows it.
const restoreTimeout = 2 * time.Minute

// SaveSnapshot takes a snapshot of the replicated state on this (leader)
// node and writes it to w as a snapshot file. It returns the header written.
func (c *Cluster) SaveSnapshot(ctx context.Context, w io.Writer) (*snapshotfile.Header, error) {
	if !c.IsLeader() {
		return nil, ErrNotLeader
	}
	future := c.snapshotNow()
	if err := future.Error(); err != nil {
		return nil, fmt.Errorf("take snapshot: %w", mapRaftError(err))
	}
	rmeta, rc, err := future.Open()
	if err != nil {
		return nil, fmt.Errorf("open snapshot: %w", err)
	}
	defer rc.Close()

	spool, err := c.scratchFile("snapshot-save-")
	if err != nil {
		return nil, err
	}
	defer removeFile(spool)
	d := snapshotfile.NewDigest()
	if _, err := io.Copy(io.MultiWriter(spool, d), contextReader{ctx, rc}); err != nil {
		return nil, fmt.Errorf("spool snapshot: %w", err)
	}
	if d.Size() != uint64(rmeta.Size) {
		return nil, fmt.Errorf("spool snapshot: read %d bytes, raft says %d", d.Size(), rmeta.Size)
	}
	meta := &snapshotfile.Header{
		Version: snapshotfile.Version, Index: rmeta.Index, Term: rmeta.Term,
		Node: c.cfg.Name, CreatedUnixNano: time.Now().UnixNano(),
		Size: d.Size(), SHA256: d.Sum(),
	}
	if err := c.countState(spool.Name(), meta); err != nil {
		return nil, err
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	if err := snapshotfile.WriteHeader(w, meta); err != nil {
		return nil, err
	}
	if _, err := io.Copy(w, contextReader{ctx, spool}); err != nil {
		return nil, err
	}
	return meta, nil
}

// RestoreSnapshot reads a snapshot file from r, verifies it and installs its
// state on the whole fleet: this (leader) node restores it through Raft and
// every follower receives it as an InstallSnapshot. It returns the file's
// header and the Raft index of the fleet once the restore is committed. A
// file that fails verification is a snapshotfile.FormatError and changes
// nothing.
func (c *Cluster) RestoreSnapshot(ctx context.Context, r io.Reader) (*snapshotfile.Header, uint64, error) {
	if !c.IsLeader() {
		return nil, 0, ErrNotLeader
	}
	meta, err := snapshotfile.ReadHeader(r)
	if err != nil {
		return nil, 0, err
	}
	spool, err := c.scratchFile("snapshot-restore-")
	if err != nil {
		return nil, 0, err
	}
	defer removeFile(spool)
	if err := snapshotfile.CopyState(spool, contextReader{ctx, r}, meta); err != nil {
		return nil, 0, err
	}
	// The checksum proves the bytes are the ones saved; opening them as an
	// FSM proves they are a state this build can run.
	var counted snapshotfile.Header
	if err := c.countState(spool.Name(), &counted); err != nil {
		return nil, 0, &snapshotfile.FormatError{Reason: err.Error()}
	}
	// Every follower installs what the leader restores: a compressed state
	// (a backup taken once the fleet was upgraded) waits until no voter
	// runs a build that cannot read it.
	compressed, err := fsm.StateCompressed(spool)
	if err != nil {
		return nil, 0, err
	}
	if compressed {
		old, err := c.upgradeBlockers(fsm.SnapshotCompressionRules)
		if err != nil {
			return nil, 0, err
		}
		if len(old) > 0 {
			return nil, 0, fsm.UpgradeInProgress(fsm.SnapshotCompressionRules, old)
		}
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	if !c.IsLeader() {
		return nil, 0, ErrNotLeader
	}
	rmeta := &raft.SnapshotMeta{
		Version: raft.SnapshotVersionMax, Index: meta.Index, Term: meta.Term, Size: int64(meta.Size),
	}
	if err := c.raft.Restore(rmeta, spool, restoreTimeout); err != nil {
		return nil, 0, fmt.Errorf("restore snapshot: %w", mapRaftError(err))
	}
	c.logger.Info("restored snapshot", "snapshot_index", meta.Index, "snapshot_node", meta.Node,
		"sessions", counted.Sessions, "events", counted.Events)
	// The restored database records the applied index it was saved at, below
	// the index Raft gave the restore: until the FSM applies an entry, every
	// replica's applied index would lag its commit index and reads would
	// wait. An empty entry moves them all past the restore point.
	barrier, err := fsm.EncodeBatch(nil)
	if err != nil {
		return nil, 0, err
	}
	f := c.raft.Apply(barrier, restoreTimeout)
	if err := awaitFuture(f, c.raftDown); err != nil {
		return nil, 0, fmt.Errorf("commit after restore: %w", mapRaftError(err))
	}
	return meta, f.Index(), nil
}

// countState opens the state at path as a scratch FSM (which validates it
// as a complete FSM database) and fills meta's counts: sessions, events
// (the sum of their journal heads) and ACL tokens.
func (c *Cluster) countState(path string, meta *snapshotfile.Header) error {
	dir, err := os.MkdirTemp(c.cfg.DataDir, "snapshot-check-")
	if err != nil {
		return fmt.Errorf("scratch dir: %w", err)
	}
	defer os.RemoveAll(dir)
	scratch, err := fsm.Open(dir, c.logger.Named("snapshot-check"))
	if err != nil {
		return err
	}
	defer scratch.Close()
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	if err := scratch.Restore(in); err != nil {
		return err
	}
	meta.Sessions, meta.Events, meta.ACLTokens = 0, 0, 0
	after := ""
	for {
		page, more, err := scratch.Sessions(after, 1024)
		if err != nil {
			return fmt.Errorf("count sessions: %w", err)
		}
		for _, s := range page {
			meta.Sessions++
			meta.Events += s.GetHeadSeq()
		}
		if !more || len(page) == 0 {
			break
		}
		after = page[len(page)-1].GetSessionId()
	}
	tokens, err := scratch.ListAclTokens()
	if err != nil {
		return fmt.Errorf("count acl tokens: %w", err)
	}
	meta.ACLTokens = uint64(len(tokens))
	return nil
}

// scratchFile creates a file for spooling a snapshot in the data dir (the
// same disk as the state, rather than a possibly small /tmp).
func (c *Cluster) scratchFile(prefix string) (*os.File, error) {
	f, err := os.CreateTemp(c.cfg.DataDir, prefix+"*")
	if err != nil {
		return nil, fmt.Errorf("scratch file: %w", err)
	}
	return f, nil
}

func removeFile(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}

// contextReader stops a long copy once ctx ends (a client that went away).
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (cr contextReader) Read(p []byte) (int, error) {
	if err := cr.ctx.Err(); err != nil {
		return 0, err
	}
	return cr.r.Read(p)
}
