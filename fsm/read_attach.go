package fsm

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Attachments returns the attachments registered on a session, ordered by
// id (expired ones included until the leader's reaper detaches them).
func (f *FSM) Attachments(sessionID string) ([]*fsmpb.Attachment, error) {
	if err := validSessionID(sessionID); err != nil {
		return nil, err
	}
	var out []*fsmpb.Attachment
	err := f.view(func(tx *bolt.Tx) error {
		prefix := append([]byte(sessionID), 0)
		c := tx.Bucket(bucketAttachments).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			at := &fsmpb.Attachment{}
			if err := proto.Unmarshal(v, at); err != nil {
				return err
			}
			out = append(out, at)
		}
		return nil
	})
	return out, err
}

// Lapsed lists what has expired by time now: sessions whose input lease has
// lapsed but is still recorded, and attachments past their TTL. The
// leader's reaper turns each into a command (ReleaseLease / Detach with
// reason "expired"), so the journal shows every expiry. At most limit of
// each are returned.
func (f *FSM) Lapsed(now int64, limit int) (leases []string, attachments []*fsmpb.Attachment, err error) {
	err = f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketSessions).Cursor()
		for k, v := c.First(); k != nil && len(leases) < limit; k, v = c.Next() {
			var s fsmpb.Session
			if err := proto.Unmarshal(v, &s); err != nil {
				return err
			}
			if s.Lease != nil && s.Lease.AttachmentId != "" && s.Lease.ExpiresUnixNano <= now {
				leases = append(leases, s.SessionId)
			}
		}
		ac := tx.Bucket(bucketAttachments).Cursor()
		for k, v := ac.First(); k != nil && len(attachments) < limit; k, v = ac.Next() {
			at := &fsmpb.Attachment{}
			if err := proto.Unmarshal(v, at); err != nil {
				return err
			}
			if at.ExpiresUnixNano <= now {
				attachments = append(attachments, at)
			}
		}
		return nil
	})
	return leases, attachments, err
}
