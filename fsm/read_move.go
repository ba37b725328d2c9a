package fsm

import (
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Nodes returns every node record, ordered by name.
func (f *FSM) Nodes() ([]*fsmpb.NodeRecord, error) {
	var out []*fsmpb.NodeRecord
	err := f.view(func(tx *bolt.Tx) error {
		var err error
		out, err = nodesIn(tx)
		return err
	})
	return out, err
}

func nodesIn(tx *bolt.Tx) ([]*fsmpb.NodeRecord, error) {
	var out []*fsmpb.NodeRecord
	err := tx.Bucket(bucketNodes).ForEach(func(_, v []byte) error {
		n := &fsmpb.NodeRecord{}
		if err := proto.Unmarshal(v, n); err != nil {
			return err
		}
		out = append(out, n)
		return nil
	})
	return out, err
}

// PlacementScan returns, in one pass over the sessions: how many active
// sessions each node hosts, the sessions with an open move, and the active
// sessions hosted by the nodes in `on` or marked stranded.
func (f *FSM) PlacementScan(on map[string]bool) (load map[string]int, moving []*fsmpb.Session, hosted []*fsmpb.Session, err error) {
	load = map[string]int{}
	err = f.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSessions).ForEach(func(_, v []byte) error {
			s := &fsmpb.Session{}
			if err := proto.Unmarshal(v, s); err != nil {
				return err
			}
			if s.State != fsmpb.SessionState_SESSION_STATE_ACTIVE {
				return nil
			}
			node := s.GetPlacement().GetNode()
			load[node]++
			if MoveOpen(s.Move) {
				moving = append(moving, s)
			}
			if on[node] || s.Stranded {
				hosted = append(hosted, s)
			}
			return nil
		})
	})
	return load, moving, hosted, err
}
