package snapshotfile

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// FuzzReadSnapshotFile: a snapshot file handed to `fakctl snapshot
// inspect` or `snapshot restore` may be anything. Reading it never panics
// and never reads a header past its bound, and a file that verifies —
// header, then exactly Size bytes of state with its SHA-256 — has a header
// that writes and reads back the same.
func FuzzReadSnapshotFile(f *testing.F) {
	golden, err := os.ReadFile("testdata/v1.snap")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add(golden[:len(Magic)+3])
	f.Add([]byte(Magic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		h, err := ReadHeader(r)
		if err != nil {
			if !IsFormatError(err) {
				t.Fatalf("ReadHeader: %v is not a FormatError", err)
			}
			return
		}
		if read := len(data) - r.Len(); read > len(Magic)+maxHeaderBytes+16 {
			t.Fatalf("read %d bytes of header", read)
		}
		if err := CopyState(io.Discard, r, h); err != nil {
			return
		}
		var again bytes.Buffer
		if err := WriteHeader(&again, h); err != nil {
			t.Fatalf("a verified header does not write back: %v", err)
		}
		back, err := ReadHeader(&again)
		if err != nil || *back != *h {
			t.Fatalf("a verified header reads back as %v (%v), was %v", back, err, h)
		}
	})
}
