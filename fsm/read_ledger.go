package fsm

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Envelope returns a budget envelope, or NOT_FOUND.
func (f *FSM) Envelope(id string) (*fsmpb.Envelope, error) {
	var e *fsmpb.Envelope
	err := f.view(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketEnvelopes).Get([]byte(id))
		if raw == nil {
			return errorf(ReasonNotFound, "envelope %s not found", id)
		}
		e = &fsmpb.Envelope{}
		return proto.Unmarshal(raw, e)
	})
	return e, err
}

// Launch returns a guarded launch, or NOT_FOUND.
func (f *FSM) Launch(id string) (*fsmpb.Launch, error) {
	var l *fsmpb.Launch
	err := f.view(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketLaunches).Get([]byte(id))
		if raw == nil {
			return errorf(ReasonNotFound, "launch %s not found", id)
		}
		l = &fsmpb.Launch{}
		return proto.Unmarshal(raw, l)
	})
	return l, err
}

// Children returns the lineage edges from parent to its children (clear,
// new and fork), ordered by child id.
func (f *FSM) Children(parent string) ([]*fsmpb.LineageEdge, error) {
	var out []*fsmpb.LineageEdge
	err := f.view(func(tx *bolt.Tx) error {
		prefix := append([]byte(parent), 0)
		c := tx.Bucket(bucketLineage).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			e := &fsmpb.LineageEdge{}
			if err := proto.Unmarshal(v, e); err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}
