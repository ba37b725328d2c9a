package api

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// NewID returns prefix + 12 hex digits of the current unix milliseconds +
// 16 random hex digits. Ids are drawn by the node building a command, never
// inside fsm.Apply. The time prefix makes ids sort by creation (session
// lists come out oldest first) and makes the FSM's B-tree inserts land at
// the right edge of the index instead of on a random page each time, which
// is most of the write cost of the request-id table under load.
func NewID(prefix string) string {
	var b [14]byte
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(time.Now().UnixMilli()))
	copy(b[:6], ms[2:])
	if _, err := rand.Read(b[6:]); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return prefix + hex.EncodeToString(b[:])
}
