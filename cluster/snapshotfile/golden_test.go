package snapshotfile

import (
	"bytes"
	"os"
	"testing"
)

// testdata/v1.snap is a version 1 snapshot file with every header field set,
// as this package wrote it when the header was the API message
// fak.v1.SnapshotMeta: the format must keep reading it, and writing its
// header again must give the same bytes.
func TestGoldenFile(t *testing.T) {
	data, err := os.ReadFile("testdata/v1.snap")
	if err != nil {
		t.Fatal(err)
	}
	want := &Header{
		Version: 1, Index: 1234567, Term: 42, Node: "n1", CreatedUnixNano: 1767225600123456789,
		Size: 74, SHA256: "62f0f75c8deb22ef0886a06812e2728ce9172728371ee6524fdfb90ffb1c265f",
		Sessions: 3, Events: 300, ACLTokens: 2,
	}
	r := bytes.NewReader(data)
	got, err := ReadHeader(r)
	if err != nil {
		t.Fatal(err)
	}
	if *got != *want {
		t.Fatalf("header %v; want %v", got, want)
	}
	var state bytes.Buffer
	if err := CopyState(&state, r, got); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := WriteHeader(&again, want); err != nil {
		t.Fatal(err)
	}
	again.Write(state.Bytes())
	if !bytes.Equal(again.Bytes(), data) {
		t.Fatalf("rewritten file differs:\n got %x\nwant %x", again.Bytes(), data)
	}
}
