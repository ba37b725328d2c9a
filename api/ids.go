package api

import (
	"crypto/rand"
	"encoding/hex"
)

// newID returns prefix followed by 20 random hex digits. Ids are drawn by
// the node building a command, never inside fsm.Apply.
func newID(prefix string) string {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return prefix + hex.EncodeToString(b[:])
}
