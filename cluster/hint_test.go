package cluster

import (
	"strings"
	"testing"
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
		"empty":           nil,
		"another message": append([]byte{2}, full[1:]...),
		"no session":      encodeHint(RunnerHint{Epoch: 3, InputSeq: 4}),
		"cut in a varint": {hintMessage, 0x80},
		"a huge session":  encodeHint(RunnerHint{SessionID: strings.Repeat("x", 1<<10), Epoch: 1, InputSeq: 1}),
		"only the tag":    {hintMessage},
		"only an epoch":   {hintMessage, 3},
	} {
		if got, ok := decodeHint(b); ok {
			t.Errorf("%s: decoded as %+v", name, got)
		}
	}
}
