package workspace_test

import (
	"bytes"
	"testing"

	"github.com/fak-dev/fak/node/workspace"
)

// FuzzUnmarshalManifest: a manifest comes from another node, which may be
// hostile. Decoding never panics; what it accepts passes Validate (no
// absolute path, no "..", no link out, parents before children) and
// encodes canonically to bytes that decode to the same digest.
func FuzzUnmarshalManifest(f *testing.F) {
	h := hashOf([]byte("x"))
	for _, s := range []string{
		`{"entries":[]}`,
		`{"entries":[{"path":"a","type":"dir","mode":493},{"path":"a/b","type":"file","mode":420,"size":1,"chunks":["` + h + `"]},{"path":"a/l","type":"symlink","mode":511,"target":"b"}]}`,
		`{"entries":[{"path":"../x","type":"file","mode":420}]}`,
		`{"entries":[{"path":"l","type":"symlink","mode":511,"target":"/etc"}]}`,
		`{"entries":[{"path":"a/b","type":"file","mode":420}]}`,
		`{"entries":null,"extra":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := workspace.UnmarshalManifest(b)
		if err != nil {
			return
		}
		if err := workspace.Validate(m, 0); err != nil {
			t.Fatalf("accepted a manifest Validate refuses: %v", err)
		}
		again, err := workspace.UnmarshalManifest(m.Marshal())
		if err != nil {
			t.Fatalf("its canonical form does not decode: %v", err)
		}
		if again.Digest() != m.Digest() || !bytes.Equal(again.Marshal(), m.Marshal()) {
			t.Fatalf("canonical form not stable: %s vs %s", again.Digest(), m.Digest())
		}
	})
}
