package fsm

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Retention. A stopped session's journal stays in the replicated state
// until it is purged: by an operator (one session, `fakctl session purge`)
// or by the leader's retention pass (sessions stopped longer than the
// fleet's retain_stopped, in batches). A purge removes the session's
// record, journal, attachments and lineage edges — children keep their
// own journals and their parent's id — and appends one entry per session
// to the fleet's audit log, which is never purged. Everything is decided
// here, from the command and the state: the pass only proposes.

// Purge causes.
const (
	PurgeCauseOperator  = "operator"
	PurgeCauseRetention = "retention"
)

// MaxPurgeBatch bounds the sessions one purge names.
const MaxPurgeBatch = 256

// KindSessionPurged is the audit log's entry for a purged session.
const KindSessionPurged = "session.purged"

// StoppedAt is when s stopped: its stopped_unix_nano, or for a session
// stopped before that was recorded, its last update (the stop, or later).
func StoppedAt(s *fsmpb.Session) int64 {
	if s.StoppedUnixNano != 0 {
		return s.StoppedUnixNano
	}
	return s.UpdatedUnixNano
}

// PurgeDue lists up to limit sessions stopped before cutoff (sorted by
// id): what a retention pass proposes.
func (f *FSM) PurgeDue(cutoff int64, limit int) ([]string, error) {
	var out []string
	err := f.view(func(tx *bolt.Tx) error {
		var s fsmpb.Session
		return tx.Bucket(bucketSessions).ForEach(func(k, v []byte) error {
			if len(out) >= limit {
				return nil
			}
			s.Reset()
			if err := proto.Unmarshal(v, &s); err != nil {
				return err
			}
			if s.State == fsmpb.SessionState_SESSION_STATE_STOPPED && StoppedAt(&s) < cutoff {
				out = append(out, string(k))
			}
			return nil
		})
	})
	return out, err
}

func (a *applier) purgeSessions(c *fsmpb.Command, cmd *fsmpb.PurgeSessions) (*fsmpb.Result, *Error) {
	switch {
	case len(cmd.SessionIds) == 0 || len(cmd.SessionIds) > MaxPurgeBatch:
		return nil, errorf(ReasonInvalidArgument, "a purge names 1-%d sessions", MaxPurgeBatch)
	case cmd.Cause == PurgeCauseOperator && len(cmd.SessionIds) != 1:
		return nil, errorf(ReasonInvalidArgument, "an operator purges one session at a time")
	case cmd.Cause != PurgeCauseOperator && cmd.Cause != PurgeCauseRetention:
		return nil, errorf(ReasonInvalidArgument, "purge cause must be operator or retention")
	case len(cmd.By) > MaxReasonBytes:
		return nil, errorf(ReasonInvalidArgument, "purge by longer than %d bytes", MaxReasonBytes)
	}
	out := &fsmpb.Purge{}
	for _, id := range cmd.SessionIds {
		s, err := a.loadSession(id)
		if cmd.Cause == PurgeCauseOperator {
			switch {
			case err != nil:
				return nil, err
			case s.State != fsmpb.SessionState_SESSION_STATE_STOPPED:
				return nil, errorf(ReasonNotStopped, "session %s is not stopped: stop it first (fakctl session stop %s)", id, id)
			}
		} else if err != nil || s.State != fsmpb.SessionState_SESSION_STATE_STOPPED || StoppedAt(s) >= cmd.StoppedBeforeUnixNano {
			out.Skipped = append(out.Skipped, id)
			continue
		}
		out.Entries = append(out.Entries, a.purge(c, s, cmd))
	}
	return &fsmpb.Result{Body: &fsmpb.Result_Purge{Purge: out}}, nil
}

// purge removes s and journals it in the audit log.
func (a *applier) purge(c *fsmpb.Command, s *fsmpb.Session, cmd *fsmpb.PurgeSessions) *fsmpb.AuditEntry {
	e := &fsmpb.AuditEntry{
		TimeUnixNano: c.TimeUnixNano, Kind: KindSessionPurged, SessionId: s.SessionId, Cause: cmd.Cause, By: cmd.By,
		Title: s.Title, Events: s.HeadSeq, StoppedUnixNano: StoppedAt(s),
	}
	prefix := append([]byte(s.SessionId), 0)
	e.Bytes = deletePrefix(a.journal, prefix)
	deletePrefix(a.attach, prefix)
	deletePrefix(a.lineage, prefix) // the edges to its children
	if s.ParentSession != "" {
		_ = a.lineage.Delete(append(append([]byte(s.ParentSession), 0), s.SessionId...))
	}
	if err := a.sessions.Delete([]byte(s.SessionId)); err != nil {
		panic("fsm: purge " + s.SessionId + ": " + err.Error())
	}
	a.appendAudit(e)
	meta := a.tx.Bucket(bucketMeta)
	addMetaCounter(meta, purgedKey(cmd.Cause), 1)
	addMetaCounter(meta, keyPurgedBytes, e.Bytes)
	return e
}

// The purge counters of the meta bucket (Counts).
var keyPurgedBytes = []byte("purged_bytes")

func purgedKey(cause string) []byte { return []byte("purged_" + cause) }

func metaCounter(meta *bolt.Bucket, key []byte) uint64 { return readU64(meta.Get(key)) }

func addMetaCounter(meta *bolt.Bucket, key []byte, n uint64) {
	if err := meta.Put(key, u64(metaCounter(meta, key)+n)); err != nil {
		panic("fsm: meta counter: " + err.Error())
	}
}

// Audit returns up to limit entries of the fleet's audit log from seq
// from on, oldest first.
func (f *FSM) Audit(from uint64, limit int) ([]*fsmpb.AuditEntry, error) {
	var out []*fsmpb.AuditEntry
	err := f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketAudit).Cursor()
		for k, v := c.Seek(u64(from)); k != nil && len(out) < limit; k, v = c.Next() {
			e := &fsmpb.AuditEntry{}
			if err := proto.Unmarshal(v, e); err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// deletePrefix deletes every key of b starting with prefix and returns the
// bytes of the values removed.
func deletePrefix(b *bolt.Bucket, prefix []byte) uint64 {
	var n uint64
	cur := b.Cursor()
	for k, v := cur.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = cur.Seek(prefix) {
		n += uint64(len(v))
		if err := cur.Delete(); err != nil {
			panic("fsm: delete " + string(k) + ": " + err.Error())
		}
	}
	return n
}

// appendAudit appends e to the audit log under the next seq.
func (a *applier) appendAudit(e *fsmpb.AuditEntry) {
	b := a.tx.Bucket(bucketAudit)
	e.Seq = 1
	if k, _ := b.Cursor().Last(); k != nil {
		e.Seq = readU64(k) + 1
	}
	raw, err := proto.Marshal(e)
	if err != nil {
		panic("fsm: encode audit entry: " + err.Error())
	}
	if err := b.Put(u64(e.Seq), raw); err != nil {
		panic("fsm: put audit entry: " + err.Error())
	}
}
