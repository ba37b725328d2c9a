package fsm

import (
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// LookupAclToken returns the stored token whose secret hashes to
// secretSHA256, or nil when none does (never stored, or revoked).
func (f *FSM) LookupAclToken(secretSHA256 []byte) (*fsmpb.AclToken, error) {
	if len(secretSHA256) == 0 {
		return nil, nil
	}
	var rec *fsmpb.AclToken
	err := f.view(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketACLHash).Get(secretSHA256)
		if id == nil {
			return nil
		}
		raw := tx.Bucket(bucketACL).Get(id)
		if raw == nil {
			return nil
		}
		rec = &fsmpb.AclToken{}
		return proto.Unmarshal(raw, rec)
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// ListAclTokens returns every stored token, ordered by accessor id.
func (f *FSM) ListAclTokens() ([]*fsmpb.AclToken, error) {
	var out []*fsmpb.AclToken
	err := f.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketACL).ForEach(func(_, v []byte) error {
			rec := &fsmpb.AclToken{}
			if err := proto.Unmarshal(v, rec); err != nil {
				return err
			}
			out = append(out, rec)
			return nil
		})
	})
	return out, err
}
