package fsm

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// EntryType is the first byte of every Raft log entry fak writes. The rest
// of the entry is a protobuf message of that type.
type EntryType uint8

const (
	// EntryBatch carries an fsmpb.Batch: one or more commands coalesced on
	// the leader.
	EntryBatch EntryType = 1

	// IgnoreUnknownFlag marks an entry type that older nodes may skip when
	// they do not know it (Nomad's convention). An unknown type without the
	// flag cannot be decoded into commands, so it is answered with a single
	// INVALID_ARGUMENT result and changes nothing.
	IgnoreUnknownFlag EntryType = 0x80
)

// EncodeBatch encodes commands into one Raft log entry.
func EncodeBatch(cmds []*fsmpb.Command) ([]byte, error) {
	body, err := proto.Marshal(&fsmpb.Batch{Commands: cmds})
	if err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	buf := make([]byte, 0, 1+len(body))
	buf = append(buf, byte(EntryBatch))
	return append(buf, body...), nil
}

// decodeEntry decodes a log entry into its commands. ignore reports an
// unknown entry type flagged as safe to skip.
func decodeEntry(data []byte) (cmds []*fsmpb.Command, ignore bool, err error) {
	if len(data) == 0 {
		return nil, true, nil // zero-length entries are no-op verifiers
	}
	t := EntryType(data[0])
	switch t {
	case EntryBatch:
		var b fsmpb.Batch
		if err := proto.Unmarshal(data[1:], &b); err != nil {
			return nil, false, fmt.Errorf("decode batch: %w", err)
		}
		return b.Commands, false, nil
	default:
		if t&IgnoreUnknownFlag != 0 {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("unknown entry type %d", t)
	}
}
