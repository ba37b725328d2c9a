package cluster

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// A runner hint survives its encoding; anything else a peer could send
// on the gossip port is dropped, not misread.
func TestRunnerHintCodec(t *testing.T) {
	h := RunnerHint{SessionID: "ses_01abc", Epoch: 3, InputSeq: 1 << 40}
	got, ok := decodeHint(encodeHint(h))
	if !ok || got != h {
		t.Fatalf("decode(encode(%+v)) = %+v, %v", h, got, ok)
	}
	full := encodeHint(h)
	for name, b := range map[string][]byte{
		"empty":                nil,
		"another message":      append([]byte{3}, full[1:]...),
		"a view cut short":     {viewMessage, 0x0a, 0x20, 's'},
		"a view of no session": {viewMessage},
		"no session":           encodeHint(RunnerHint{Epoch: 3, InputSeq: 4}),
		"cut in a varint":      {hintMessage, 0x80},
		"a huge session":       encodeHint(RunnerHint{SessionID: strings.Repeat("x", 1<<10), Epoch: 1, InputSeq: 1}),
		"only the tag":         {hintMessage},
		"only an epoch":        {hintMessage, 3},
	} {
		if got, ok := decodeHint(b); ok {
			t.Errorf("%s: decoded as %+v", name, got)
		}
	}
}

// A move-step view survives its encoding when it fits one datagram; a
// session too large for one is not sent (the leader nudges instead).
func TestRunnerHintViewCodec(t *testing.T) {
	s := &fsmpb.Session{SessionId: "ses_01abc", Epoch: 2, HeadSeq: 9, Placement: &fsmpb.Placement{Node: "n1", RuntimeAdapter: "echo"},
		Move: &fsmpb.Move{MoveId: "mov_1", State: fsm.MoveAdmitted, Admitted: &fsmpb.Placement{Node: "n2", RuntimeAdapter: "echo"}}}
	b, ok := encodeView(s)
	if !ok {
		t.Fatal("a small session does not fit a view hint")
	}
	got, ok := decodeHint(b)
	if !ok || got.SessionID != s.SessionId || got.Epoch != 2 || !proto.Equal(got.View, s) {
		t.Fatalf("decode(encode(view)) = %+v, %v", got, ok)
	}
	big := proto.Clone(s).(*fsmpb.Session)
	big.Title = strings.Repeat("t", maxViewBytes)
	if _, ok := encodeView(big); ok {
		t.Fatal("a session over one datagram encoded as a view hint")
	}
}
