package fsm

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Reads serve from the local replica. Callers that need linearizability wait
// for a read index first (cluster package); these functions never block on
// Raft.

func (f *FSM) view(fn func(tx *bolt.Tx) error) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.db.View(fn)
}

// Session returns one session's metadata, or a NOT_FOUND error.
func (f *FSM) Session(id string) (*fsmpb.Session, error) {
	if err := validSessionID(id); err != nil {
		return nil, err
	}
	var s *fsmpb.Session
	err := f.view(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketSessions).Get([]byte(id))
		if raw == nil {
			return errorf(ReasonNotFound, "session %s not found", id)
		}
		s = &fsmpb.Session{}
		return proto.Unmarshal(raw, s)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Sessions returns up to limit sessions ordered by id, starting after the id
// `after` ("" = from the first). more reports whether sessions follow.
func (f *FSM) Sessions(after string, limit int) (out []*fsmpb.Session, more bool, err error) {
	err = f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketSessions).Cursor()
		var k, v []byte
		if after == "" {
			k, v = c.First()
		} else {
			k, v = c.Seek([]byte(after))
			if k != nil && bytes.Equal(k, []byte(after)) {
				k, v = c.Next()
			}
		}
		for ; k != nil; k, v = c.Next() {
			if len(out) == limit {
				more = true
				return nil
			}
			s := &fsmpb.Session{}
			if err := proto.Unmarshal(v, s); err != nil {
				return err
			}
			out = append(out, s)
		}
		return nil
	})
	return out, more, err
}

// Events returns up to limit events of a session with seq >= from, and the
// journal head. An unknown session is NOT_FOUND.
func (f *FSM) Events(id string, from uint64, limit int) (events []*fsmpb.Event, head uint64, err error) {
	if err := validSessionID(id); err != nil {
		return nil, 0, err
	}
	if from == 0 {
		from = 1
	}
	err = f.view(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketSessions).Get([]byte(id))
		if raw == nil {
			return errorf(ReasonNotFound, "session %s not found", id)
		}
		var s fsmpb.Session
		if err := proto.Unmarshal(raw, &s); err != nil {
			return err
		}
		head = s.HeadSeq
		if from > head {
			return nil
		}
		c := tx.Bucket(bucketJournal).Cursor()
		prefix := journalKey(id, 0)[:len(id)+1]
		// The chunk holding `from` is the last one keyed at or below it.
		k, v := c.Seek(journalKey(id, from))
		if k == nil || !bytes.Equal(k, journalKey(id, from)) {
			if pk, pv := c.Prev(); pk != nil && bytes.HasPrefix(pk, prefix) {
				k, v = pk, pv
			} else {
				k, v = c.Seek(journalKey(id, from))
			}
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(events) < limit; k, v = c.Next() {
			var chunk fsmpb.EventChunk
			if err := proto.Unmarshal(v, &chunk); err != nil {
				return err
			}
			for _, ev := range chunk.Events {
				if ev.Seq >= from && len(events) < limit {
					events = append(events, ev)
				}
			}
		}
		return nil
	})
	return events, head, err
}
