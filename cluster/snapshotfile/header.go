package snapshotfile

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Header says what a snapshot file holds and how to verify it. On disk it
// is a protobuf message (proto3: zero values are left out, fields in number
// order) with the field numbers below; the API's fak.v1.SnapshotMeta
// declares the same fields with the same numbers, so a file's header bytes
// are that message's encoding and files written before this type existed
// read unchanged (testdata/v1.snap).
type Header struct {
	Version uint32 // 1: format version of the file
	Index   uint64 // 2: Raft position of the state it holds
	Term    uint64 // 3
	Node    string // 4: node that took it
	// CreatedUnixNano is when it was taken (5, unix nanoseconds).
	CreatedUnixNano int64
	Size            uint64 // 6: length of the state after the header
	SHA256          string // 7: lowercase hex SHA-256 of the state
	Sessions        uint64 // 8: what it holds: sessions,
	Events          uint64 // 9: events (the sum of the journal heads),
	ACLTokens       uint64 // 10: ACL tokens
}

// Field numbers of the header message.
const (
	fieldVersion         protowire.Number = 1
	fieldIndex           protowire.Number = 2
	fieldTerm            protowire.Number = 3
	fieldNode            protowire.Number = 4
	fieldCreatedUnixNano protowire.Number = 5
	fieldSize            protowire.Number = 6
	fieldSHA256          protowire.Number = 7
	fieldSessions        protowire.Number = 8
	fieldEvents          protowire.Number = 9
	fieldACLTokens       protowire.Number = 10
)

var errInvalidUTF8 = errors.New("string field contains invalid UTF-8")

// marshal encodes h as the protobuf message would be: fields in number
// order, zero values left out.
func (h *Header) marshal() ([]byte, error) {
	if !utf8.ValidString(h.Node) || !utf8.ValidString(h.SHA256) {
		return nil, errInvalidUTF8
	}
	var b []byte
	b = appendVarint(b, fieldVersion, uint64(h.Version))
	b = appendVarint(b, fieldIndex, h.Index)
	b = appendVarint(b, fieldTerm, h.Term)
	b = appendString(b, fieldNode, h.Node)
	b = appendVarint(b, fieldCreatedUnixNano, uint64(h.CreatedUnixNano))
	b = appendVarint(b, fieldSize, h.Size)
	b = appendString(b, fieldSHA256, h.SHA256)
	b = appendVarint(b, fieldSessions, h.Sessions)
	b = appendVarint(b, fieldEvents, h.Events)
	b = appendVarint(b, fieldACLTokens, h.ACLTokens)
	return b, nil
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// unmarshal decodes b as a protobuf decoder would: fields in any order, the
// last of a repeated field wins, unknown fields and fields of an unexpected
// wire type are skipped, strings must be UTF-8.
func (h *Header) unmarshal(b []byte) error {
	*h = Header{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			h.setVarint(num, v)
			b = b[n:]
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if s := h.stringField(num); s != nil {
				if !utf8.Valid(v) {
					return errInvalidUTF8
				}
				*s = string(v)
			}
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
		}
	}
	return nil
}

// setVarint sets the varint field num to v; another number is an unknown
// field, skipped.
func (h *Header) setVarint(num protowire.Number, v uint64) {
	switch num {
	case fieldVersion:
		h.Version = uint32(v)
	case fieldIndex:
		h.Index = v
	case fieldTerm:
		h.Term = v
	case fieldCreatedUnixNano:
		h.CreatedUnixNano = int64(v)
	case fieldSize:
		h.Size = v
	case fieldSessions:
		h.Sessions = v
	case fieldEvents:
		h.Events = v
	case fieldACLTokens:
		h.ACLTokens = v
	}
}

// stringField returns the string field num, nil for another number.
func (h *Header) stringField(num protowire.Number) *string {
	switch num {
	case fieldNode:
		return &h.Node
	case fieldSHA256:
		return &h.SHA256
	}
	return nil
}
