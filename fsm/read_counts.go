package fsm

import (
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Counts is a census of the local replica, for metrics.
type Counts struct {
	// Sessions by state.
	Sessions map[fsmpb.SessionState]int
	// LeasesHeld: sessions whose input lease is held by an attachment
	// (expired ones included until the reaper releases them).
	LeasesHeld int
	// Attachments registered on any session.
	Attachments int
	// OpenMoves: sessions with a move that has not ended.
	OpenMoves int
	// Stranded: sessions marked stranded (recover=manual on a dead node).
	Stranded int
	// Warmups: the warm-up of each session's last move that has one, by
	// its cache lineage (warm, cold, none).
	Warmups map[string][]time.Duration
	// CopyTimes: each session's newest workspace copy, from its turn's
	// end to the copy held; CopyBytesSent and CopyBytesPresent what
	// shipping them fetched and found already held, summed.
	CopyTimes                       []time.Duration
	CopyBytesSent, CopyBytesPresent uint64
	// Purged: sessions purged since the fleet began, by cause (operator,
	// retention), and the journal bytes they held.
	Purged      map[string]uint64
	PurgedBytes uint64
	// StateBytes: the size of the FSM's database (the replicated state as
	// this node holds it).
	StateBytes int64
}

// Counts reads the census in one read transaction: one pass over the
// session records (decoded, like the controllers' scans) and the key count
// of the attachments bucket.
func (f *FSM) Counts() (Counts, error) {
	c := Counts{Sessions: map[fsmpb.SessionState]int{}, Warmups: map[string][]time.Duration{}, Purged: map[string]uint64{}}
	err := f.view(func(tx *bolt.Tx) error {
		c.Attachments = tx.Bucket(bucketAttachments).Stats().KeyN
		c.StateBytes = tx.Size()
		meta := tx.Bucket(bucketMeta)
		for _, cause := range []string{PurgeCauseOperator, PurgeCauseRetention} {
			c.Purged[cause] = metaCounter(meta, purgedKey(cause))
		}
		c.PurgedBytes = metaCounter(meta, keyPurgedBytes)
		var s fsmpb.Session
		return tx.Bucket(bucketSessions).ForEach(func(_, v []byte) error {
			s.Reset()
			if err := proto.Unmarshal(v, &s); err != nil {
				return err
			}
			c.Sessions[s.State]++
			if s.Lease != nil && s.Lease.AttachmentId != "" {
				c.LeasesHeld++
			}
			if MoveOpen(s.Move) {
				c.OpenMoves++
			}
			if s.Stranded {
				c.Stranded++
			}
			if m := s.Move; m.GetWarmupNanos() > 0 {
				k := m.CacheLineage.GetCache()
				c.Warmups[k] = append(c.Warmups[k], time.Duration(m.WarmupNanos))
			}
			if cp := s.WorkspaceCopy; cp != nil && cp.CopyNanos > 0 {
				c.CopyTimes = append(c.CopyTimes, time.Duration(cp.CopyNanos))
				c.CopyBytesSent += cp.Transfer.GetBytesSent()
				c.CopyBytesPresent += cp.Transfer.GetBytesPresent()
			}
			return nil
		})
	})
	return c, err
}
