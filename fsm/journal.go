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

// The journal: each session's events, addressed 1, 2, … (seq). A
// command that journals takes the next addresses (newEvent) and stores
// its events in chunks of consecutive events, each keyed by session id and
// its first event's seq (putEvents). appendEvents is a client's append; with an expected head
// it is a compare-and-append, refused with SEQ_MISMATCH (and the head)
// when the journal has moved on. JournalDigest identifies a prefix of a
// journal for a move's checkpoint.

// newEvent assigns the next address of s's journal to an event.
func newEvent(s *fsmpb.Session, c *fsmpb.Command, kind, text string, data []byte) *fsmpb.Event {
	s.HeadSeq++
	return &fsmpb.Event{
		SessionId:    s.SessionId,
		Seq:          s.HeadSeq,
		Kind:         kind,
		TimeUnixNano: c.TimeUnixNano,
		Text:         text,
		Data:         data,
		RequestId:    c.RequestId,
	}
}

// putEvents stores events (consecutive, of one session) as one chunk keyed
// by the first event's address.
func (a *applier) putEvents(events ...*fsmpb.Event) {
	buf, err := proto.Marshal(&fsmpb.EventChunk{Events: events})
	if err != nil {
		panic("fsm: marshal events: " + err.Error())
	}
	a.must(a.journal.Put(journalKey(events[0].SessionId, events[0].Seq), buf))
}

func (a *applier) appendEvents(c *fsmpb.Command, cmd *fsmpb.AppendEvents) (*fsmpb.Result, *Error) {
	if err := validateEventInputs(cmd.Events); err != nil {
		return nil, err
	}
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	if err := activeSession(s); err != nil {
		return nil, err
	}
	if cmd.ExpectedSeq != nil && *cmd.ExpectedSeq != s.HeadSeq {
		e := errorf(ReasonSeqMismatch, "expected head %d, journal head is %d", *cmd.ExpectedSeq, s.HeadSeq)
		e.HeadSeq = s.HeadSeq
		return nil, e
	}
	first := s.HeadSeq + 1
	events := make([]*fsmpb.Event, len(cmd.Events))
	for i, in := range cmd.Events {
		events[i] = newEvent(s, c, in.Kind, in.Text, in.Data)
	}
	a.putEvents(events...)
	s.UpdatedUnixNano = c.TimeUnixNano
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Append{Append: &fsmpb.AppendResult{
		SessionId: s.SessionId, FirstSeq: first, LastSeq: s.HeadSeq,
	}}}, nil
}

// validateEventInputs checks the parts of an append that do not depend on
// state. The API calls it before proposing, so bad input never reaches the
// log; Apply calls it again because the log is the authority.
func validateEventInputs(events []*fsmpb.EventInput) *Error {
	if len(events) == 0 {
		return errorf(ReasonInvalidArgument, "at least one event is required")
	}
	if len(events) > MaxEventsPerAppend {
		return errorf(ReasonInvalidArgument, "%d events in one append; the limit is %d", len(events), MaxEventsPerAppend)
	}
	for i, ev := range events {
		if len(ev.Kind) > MaxKindBytes || !AppendableKind(ev.Kind) {
			if runnerKinds[ev.Kind] {
				return errorf(ReasonInvalidArgument, "event %d: kind %q is written by the session's runner, fenced by its epoch", i, ev.Kind)
			}
			if ev.Kind == KindInput {
				return errorf(ReasonInvalidArgument, "event %d: input is submitted with Act by the input lease holder", i)
			}
			if KnownKind(ev.Kind) {
				return errorf(ReasonInvalidArgument, "event %d: kind %q is written by fak itself", i, ev.Kind)
			}
			return errorf(ReasonInvalidArgument, "event %d: unknown kind %q", i, truncate(ev.Kind, MaxKindBytes))
		}
	}
	return nil
}

// ValidateEventInputs is validateEventInputs for callers outside the FSM.
func ValidateEventInputs(events []*fsmpb.EventInput) error {
	if err := validateEventInputs(events); err != nil {
		return err
	}
	return nil
}

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
// one read transaction: the journal is never in memory whole. An unknown
// session is NOT_FOUND; upTo beyond the journal head is an error (the
// replica does not hold those events yet).
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
