package snapshotfile

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// The header decodes as the protobuf message it is on disk: fields in any
// order, the last occurrence wins, unknown fields (of any wire type) and
// known numbers with an unexpected wire type are skipped.
func TestHeaderDecodesLikeProtobuf(t *testing.T) {
	var b []byte
	b = protowire.AppendTag(b, fieldSHA256, protowire.BytesType)
	b = protowire.AppendString(b, "abc")
	b = protowire.AppendTag(b, 99, protowire.BytesType) // unknown
	b = protowire.AppendString(b, "from a later writer")
	b = protowire.AppendTag(b, fieldIndex, protowire.VarintType)
	b = protowire.AppendVarint(b, 7)
	b = protowire.AppendTag(b, fieldIndex, protowire.VarintType) // last wins
	b = protowire.AppendVarint(b, 8)
	b = protowire.AppendTag(b, fieldTerm, protowire.Fixed64Type) // wrong wire type: skipped
	b = protowire.AppendFixed64(b, 5)
	b = protowire.AppendTag(b, 100, protowire.StartGroupType) // unknown group
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 3)
	b = protowire.AppendTag(b, 100, protowire.EndGroupType)
	b = protowire.AppendTag(b, fieldVersion, protowire.VarintType) // uint32: truncated
	b = protowire.AppendVarint(b, 1<<32|1)
	b = protowire.AppendTag(b, fieldCreatedUnixNano, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(math.MaxUint64)) // int64 -1
	var h Header
	if err := h.unmarshal(b); err != nil {
		t.Fatal(err)
	}
	want := Header{Version: 1, Index: 8, SHA256: "abc", CreatedUnixNano: -1}
	if h != want {
		t.Fatalf("decoded %+v; want %+v", h, want)
	}
}

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []Header{
		{},
		{Version: 1},
		{Version: math.MaxUint32, Index: math.MaxUint64, Term: 1, Node: "nœud-1", CreatedUnixNano: math.MinInt64,
			Size: 1 << 40, SHA256: strings.Repeat("f", 64), Sessions: 1, Events: 2, ACLTokens: 3},
		{CreatedUnixNano: -1, Node: "n"},
	} {
		b, err := h.marshal()
		if err != nil {
			t.Fatal(err)
		}
		var got Header
		if err := got.unmarshal(b); err != nil || got != h {
			t.Errorf("%+v: decoded %+v, %v", h, got, err)
		}
	}
	if b, _ := (&Header{}).marshal(); len(b) != 0 {
		t.Errorf("an empty header encodes as %x; want no bytes (proto3 leaves zero values out)", b)
	}
}

func TestHeaderRefusals(t *testing.T) {
	tag := func(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }
	for name, b := range map[string][]byte{
		"invalid utf-8 node": protowire.AppendString(tag(fieldNode, protowire.BytesType), "\xff"),
		"field number 0":     protowire.AppendVarint(tag(0, protowire.VarintType), 1),
		"cut varint":         append(tag(fieldIndex, protowire.VarintType), 0x80),
		"cut string":         append(tag(fieldNode, protowire.BytesType), 5, 'a'),
		"stray end group":    tag(7, protowire.EndGroupType),
	} {
		var h Header
		if err := h.unmarshal(b); err == nil {
			t.Errorf("%s: decoded %+v; want an error", name, h)
		}
	}
	if _, err := (&Header{Node: "\xff"}).marshal(); err == nil {
		t.Error("a header with an invalid UTF-8 node encoded")
	}
}
