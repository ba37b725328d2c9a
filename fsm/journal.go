package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The journal: each session's events, addressed 1, 2, … (seq), stored as
// chunks of consecutive events keyed by session id and the first event's
// seq.

// hashJournalEvent feeds one event to a journal digest (JournalDigest):
// its seq (8 bytes, little-endian), then its kind, text and data, each
// prefixed by its length (8 bytes, little-endian).
func hashJournalEvent(h hash.Hash, e *fsmpb.Event) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], e.Seq)
	h.Write(n[:])
	binary.LittleEndian.PutUint64(n[:], uint64(len(e.Kind)))
	h.Write(n[:])
	io.WriteString(h, e.Kind)
	binary.LittleEndian.PutUint64(n[:], uint64(len(e.Text)))
	h.Write(n[:])
	io.WriteString(h, e.Text)
	binary.LittleEndian.PutUint64(n[:], uint64(len(e.Data)))
	h.Write(n[:])
	h.Write(e.Data)
}

// JournalDigest is the checkpoint digest (the function JournalDigest) of
// the events 1..upTo of a session's journal in f, read chunk by chunk in
// one read transaction: the journal is never in memory whole. An unknown session is NOT_FOUND; upTo beyond
// the journal head is an error (the replica does not hold those events
// yet).
func (f *FSM) JournalDigest(sessionID string, upTo uint64) (string, error) {
	if err := validSessionID(sessionID); err != nil {
		return "", err
	}
	var digest string
	err := f.view(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketSessions).Get([]byte(sessionID))
		if raw == nil {
			return errorf(ReasonNotFound, "session %s not found", sessionID)
		}
		var s fsmpb.Session
		if err := proto.Unmarshal(raw, &s); err != nil {
			return err
		}
		if upTo > s.HeadSeq {
			return fmt.Errorf("the replica holds %d of the %d events up to the checkpoint", s.HeadSeq, upTo)
		}
		h := sha256.New()
		next := uint64(1) // the seq the digest takes next
		prefix := journalKey(sessionID, 0)[:len(sessionID)+1]
		c := tx.Bucket(bucketJournal).Cursor()
		var chunk fsmpb.EventChunk
		for k, v := c.Seek(prefix); next <= upTo && k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if err := proto.Unmarshal(v, &chunk); err != nil {
				return err
			}
			for _, e := range chunk.Events {
				if e.Seq > upTo {
					break
				}
				if e.Seq != next {
					return fmt.Errorf("journal of session %s: event #%d where #%d was expected", sessionID, e.Seq, next)
				}
				hashJournalEvent(h, e)
				next++
			}
		}
		if next <= upTo {
			return fmt.Errorf("the replica holds %d of the %d events up to the checkpoint", next-1, upTo)
		}
		digest = hex.EncodeToString(h.Sum(nil))
		return nil
	})
	if err != nil {
		return "", err
	}
	return digest, nil
}
