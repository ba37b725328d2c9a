package apiclient

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fak-dev/fak/cluster/snapshotfile"
)

// full is a header with every field set.
func full() *snapshotfile.Header {
	return &snapshotfile.Header{
		Version: snapshotfile.Version, Index: math.MaxUint64, Term: 7, Node: "nœud-1", CreatedUnixNano: -5,
		Size: 1 << 40, SHA256: strings.Repeat("ab", 32), Sessions: 1, Events: 2, ACLTokens: 3,
	}
}

// The API message carries every field of the header, and a new field of
// fak.v1.SnapshotMeta fails here until the header carries it too.
func TestSnapshotMetaCarriesEveryField(t *testing.T) {
	m := SnapshotMeta(full()).ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); !m.Has(f) {
			t.Errorf("fak.v1.SnapshotMeta.%s is not set from the snapshot file's header", f.Name())
		}
	}
}

// The file's header is the encoding of fak.v1.SnapshotMeta: the same bytes
// both ways, so files written when the format used the API message read
// unchanged, and a header the API message describes reads back the same.
func TestSnapshotHeaderIsTheAPIMessage(t *testing.T) {
	for _, h := range []*snapshotfile.Header{
		full(),
		{Version: snapshotfile.Version, SHA256: strings.Repeat("0", 64)},
		{Version: snapshotfile.Version, Index: 1, Term: 1, Node: "n1", CreatedUnixNano: 1767225600123456789, Size: 10, SHA256: strings.Repeat("f", 64)},
	} {
		var file bytes.Buffer
		if err := snapshotfile.WriteHeader(&file, h); err != nil {
			t.Fatal(err)
		}
		want, err := proto.Marshal(SnapshotMeta(h))
		if err != nil {
			t.Fatal(err)
		}
		got := file.Bytes()[len(snapshotfile.Magic)+4:]
		if !bytes.Equal(got, want) {
			t.Errorf("%+v: header bytes %x; the API message encodes as %x", h, got, want)
		}

		// And back: a file whose header proto.Marshal wrote, an unknown
		// field appended as a later writer might.
		msg := SnapshotMeta(h)
		msg.ProtoReflect().SetUnknown(protoreflect.RawFields{0xa2, 0x06, 0x01, 'x'}) // field 100, bytes "x"
		hdr, err := proto.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		old := append([]byte(snapshotfile.Magic), binary.BigEndian.AppendUint32(nil, uint32(len(hdr)))...)
		read, err := snapshotfile.ReadHeader(bytes.NewReader(append(old, hdr...)))
		if err != nil || *read != *h {
			t.Errorf("%+v: read back %+v, %v", h, read, err)
		}
	}
}

func TestVerifySnapshotFile(t *testing.T) {
	state := []byte("state")
	d := snapshotfile.NewDigest()
	d.Write(state)
	h := &snapshotfile.Header{Version: snapshotfile.Version, Index: 3, Node: "n2", Size: d.Size(), SHA256: d.Sum(), Sessions: 1}
	var file bytes.Buffer
	if err := snapshotfile.WriteHeader(&file, h); err != nil {
		t.Fatal(err)
	}
	file.Write(state)
	meta, err := VerifySnapshotFile(bytes.NewReader(file.Bytes()))
	if err != nil || !proto.Equal(meta, SnapshotMeta(h)) {
		t.Fatalf("VerifySnapshotFile: %v, %v", meta, err)
	}
	bad := bytes.Clone(file.Bytes())
	bad[len(bad)-1] ^= 1
	if _, err := VerifySnapshotFile(bytes.NewReader(bad)); !snapshotfile.IsFormatError(err) {
		t.Fatalf("a corrupted file: %v; want a format error", err)
	}
}
