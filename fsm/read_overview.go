package fsm

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// FleetSession is one session of a fleet page with what an overview shows
// beside it, read in the same transaction.
type FleetSession struct {
	Session *fsmpb.Session
	// Envelope is the session's budget envelope (nil: none).
	Envelope *fsmpb.Envelope
	// LeaseHolder is the attachment record of the lease holder (nil: the
	// lease is free or its attachment is gone).
	LeaseHolder *fsmpb.Attachment
}

// Fleet is one consistent read of the fleet: the node records, the load
// and counts over every session, and one page of sessions.
type Fleet struct {
	// AppliedIndex is the applied index the read saw.
	AppliedIndex uint64
	Nodes        []*fsmpb.NodeRecord // ordered by name
	// Hosted counts the active sessions placed on each node.
	Hosted    map[string]int
	Active    int
	Stopped   int
	MovesOpen int
	// Purged: sessions purged since the fleet began (the audit log);
	// StateBytes: the size of this replica's state.
	Purged     uint64
	StateBytes int64
	// Sessions is the page, ordered by session id; More reports whether
	// matching sessions follow it.
	Sessions []FleetSession
	More     bool
}

// Fleet reads the fleet in one transaction. The page holds up to limit
// sessions with an id greater than after ("" = from the first), active
// ones only unless includeStopped. Counts cover every session.
func (f *FSM) Fleet(after string, limit int, includeStopped bool) (*Fleet, error) {
	out := &Fleet{Hosted: map[string]int{}}
	err := f.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		out.AppliedIndex = readU64(meta.Get(keyAppliedIndex))
		out.Purged = metaCounter(meta, purgedKey(PurgeCauseOperator)) + metaCounter(meta, purgedKey(PurgeCauseRetention))
		out.StateBytes = tx.Size()
		err := tx.Bucket(bucketNodes).ForEach(func(_, v []byte) error {
			n := &fsmpb.NodeRecord{}
			if err := proto.Unmarshal(v, n); err != nil {
				return err
			}
			out.Nodes = append(out.Nodes, n)
			return nil
		})
		if err != nil {
			return err
		}
		envelopes, attachments := tx.Bucket(bucketEnvelopes), tx.Bucket(bucketAttachments)
		return tx.Bucket(bucketSessions).ForEach(func(k, v []byte) error {
			s := &fsmpb.Session{}
			if err := proto.Unmarshal(v, s); err != nil {
				return err
			}
			active := s.State == fsmpb.SessionState_SESSION_STATE_ACTIVE
			if active {
				out.Active++
				out.Hosted[s.GetPlacement().GetNode()]++
			} else {
				out.Stopped++
			}
			if MoveOpen(s.Move) {
				out.MovesOpen++
			}
			if (!active && !includeStopped) || (after != "" && bytes.Compare(k, []byte(after)) <= 0) {
				return nil
			}
			if len(out.Sessions) == limit {
				out.More = true
				return nil
			}
			fs := FleetSession{Session: s}
			if s.EnvelopeId != "" {
				if raw := envelopes.Get([]byte(s.EnvelopeId)); raw != nil {
					fs.Envelope = &fsmpb.Envelope{}
					if err := proto.Unmarshal(raw, fs.Envelope); err != nil {
						return err
					}
				}
			}
			if id := s.GetLease().GetAttachmentId(); id != "" {
				if raw := attachments.Get(attachmentKey(s.SessionId, id)); raw != nil {
					fs.LeaseHolder = &fsmpb.Attachment{}
					if err := proto.Unmarshal(raw, fs.LeaseHolder); err != nil {
						return err
					}
				}
			}
			out.Sessions = append(out.Sessions, fs)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
