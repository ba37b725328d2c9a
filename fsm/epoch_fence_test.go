package fsm

import (
	"testing"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// TestEpochFence: each epoch check passes its one epoch and refuses any
// other with STALE_EPOCH and the message its command has always given.
func TestEpochFence(t *testing.T) {
	s := &fsmpb.Session{Epoch: 3, MaxEpoch: 5} // epoch 4 and 5 were restores that never cut over
	for _, tt := range []struct {
		name string
		err  *Error
		want string // "" = passes
	}{
		{"current", checkEpoch(s, 3, "runner of"), ""},
		{"input, stale", checkEpoch(s, 2, "input targets"), "input targets epoch 2; the session's current epoch is 3"},
		{"runner, ahead", checkEpoch(s, 4, "runner of"), "runner of epoch 4; the session's current epoch is 3"},
		{"checkpoint, stale", checkEpoch(s, 1, "checkpoint of"), "checkpoint of epoch 1; the session's current epoch is 3"},
		{"restore as next", checkNextEpoch(s, 6), ""},
		{"restore as a used number", checkNextEpoch(s, 5), "restore as epoch 5; the next epoch is 6"},
		{"restore as current+1", checkNextEpoch(s, 4), "restore as epoch 4; the next epoch is 6"},
		{"cutover above", checkAboveEpoch(s, 4), ""},
		{"cutover at current", checkAboveEpoch(s, 3), "restored epoch 3 is not above the current epoch 3"},
		{"cutover below", checkAboveEpoch(s, 2), "restored epoch 2 is not above the current epoch 3"},
	} {
		switch {
		case tt.want == "" && tt.err != nil:
			t.Errorf("%s: refused: %v", tt.name, tt.err)
		case tt.want != "" && (tt.err == nil || tt.err.Reason != ReasonStaleEpoch || tt.err.Message != tt.want):
			t.Errorf("%s: %v, want STALE_EPOCH: %s", tt.name, tt.err, tt.want)
		}
	}
}
