package snapshotfile

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"testing"
)

// file builds a snapshot file around state.
func file(t *testing.T, state []byte, edit func(*Header)) ([]byte, *Header) {
	t.Helper()
	d := NewDigest()
	d.Write(state)
	meta := &Header{Version: Version, Index: 42, Term: 3, Node: "n1", Size: d.Size(), SHA256: d.Sum(), Sessions: 2, Events: 9}
	if edit != nil {
		edit(meta)
	}
	var b bytes.Buffer
	if err := WriteHeader(&b, meta); err != nil {
		t.Fatal(err)
	}
	b.Write(state)
	return b.Bytes(), meta
}

func TestRoundTrip(t *testing.T) {
	state := bytes.Repeat([]byte("state"), 1000)
	data, want := file(t, state, nil)
	r := bytes.NewReader(data)
	got, err := ReadHeader(r)
	if err != nil {
		t.Fatal(err)
	}
	if *got != *want {
		t.Fatalf("header %v, wrote %v", got, want)
	}
	var out bytes.Buffer
	if err := CopyState(&out, r, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), state) {
		t.Fatal("state differs")
	}
}

func TestRefusals(t *testing.T) {
	state := []byte("the state of the fleet")
	good, _ := file(t, state, nil)
	flipped := bytes.Clone(good)
	flipped[len(flipped)-3] ^= 0x20
	otherVersion, _ := file(t, state, func(m *Header) { m.Version = 2 })
	noSum, _ := file(t, state, func(m *Header) { m.SHA256 = "" })
	hugeHeader := append([]byte(Magic), binary.BigEndian.AppendUint32(nil, 1<<30)...)

	for _, tc := range []struct {
		name, want string
		data       []byte
	}{
		{"empty", "file too short", nil},
		{"not a snapshot", "bad magic", []byte("PK\x03\x04 a zip file, say")},
		{"magic only", "truncated header", []byte(Magic)},
		{"header cut", "truncated header", good[:len(Magic)+6]},
		{"huge header", "out of range", hugeHeader},
		{"other version", "unsupported version 2", otherVersion},
		{"no checksum", "no valid sha256", noSum},
		{"state cut", "truncated state", good[:len(good)-5]},
		{"trailing bytes", "unexpected bytes after", append(bytes.Clone(good), 0)},
		{"flipped byte", "checksum mismatch", flipped},
	} {
		r := bytes.NewReader(tc.data)
		meta, err := ReadHeader(r)
		if err == nil {
			err = CopyState(io.Discard, r, meta)
		}
		if !IsFormatError(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want a format error with %q", tc.name, err, tc.want)
		}
	}
}
