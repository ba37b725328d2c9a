package fsm

import (
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
}

// Counts reads the census in one read transaction: one pass over the
// session records (decoded, like the controllers' scans) and the key count
// of the attachments bucket.
func (f *FSM) Counts() (Counts, error) {
	c := Counts{Sessions: map[fsmpb.SessionState]int{}}
	err := f.view(func(tx *bolt.Tx) error {
		c.Attachments = tx.Bucket(bucketAttachments).Stats().KeyN
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
			return nil
		})
	})
	return c, err
}
