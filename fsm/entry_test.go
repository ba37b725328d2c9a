package fsm

import (
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

func TestChangedClosesAfterApply(t *testing.T) {
	h := newHarness(t)
	ch := h.f.Changed()
	select {
	case <-ch:
		t.Fatal("Changed closed before anything was applied")
	default:
	}
	if h.f.Changed() != ch {
		t.Fatal("Changed returned a new channel without a change")
	}

	h.f.ApplyBatch([]*raft.Log{h.entry(create("s1")), h.entry(appendEv("s1", ev("note", "x")))})
	select {
	case <-ch:
	default:
		t.Fatal("Changed channel still open after ApplyBatch")
	}

	// A batch that applies no command — a configuration change, the empty
	// entry of a new leader or a commit nudge — changes no state: Changed
	// stays open, Applied (for waiters on the applied index) closes.
	next, applied := h.f.Changed(), h.f.Applied()
	select {
	case <-next:
		t.Fatal("new Changed channel is already closed")
	default:
	}
	empty, err := EncodeBatch(nil)
	if err != nil {
		t.Fatal(err)
	}
	h.f.ApplyBatch([]*raft.Log{h.rawEntry(raft.LogConfiguration, nil), h.rawEntry(raft.LogCommand, empty)})
	select {
	case <-next:
		t.Fatal("Changed closed by a batch that applied no command")
	default:
	}
	select {
	case <-applied:
	default:
		t.Fatal("Applied still open after a batch")
	}
	if h.f.AppliedIndex() != h.index {
		t.Fatalf("applied index %d, want %d", h.f.AppliedIndex(), h.index)
	}
	// The next command closes Changed.
	h.f.ApplyBatch([]*raft.Log{h.entry(appendEv("s1", ev("note", "y")))})
	select {
	case <-next:
	default:
		t.Fatal("Changed channel still open after a command")
	}

	// An empty batch is not a change.
	last := h.f.Changed()
	if out := h.f.ApplyBatch(nil); len(out) != 0 {
		t.Fatalf("ApplyBatch(nil) = %v", out)
	}
	select {
	case <-last:
		t.Fatal("empty ApplyBatch closed the Changed channel")
	default:
	}
}

func TestBadEntries(t *testing.T) {
	body, err := proto.Marshal(&fsmpb.Batch{Commands: []*fsmpb.Command{create("s1"), create("s2")}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		typ  raft.LogType
		data []byte
		// wantInvalid is the number of INVALID_ARGUMENT results; 0 means
		// a nil response.
		wantInvalid int
	}{
		{"unknown entry type", raft.LogCommand, append([]byte{0x05}, body...), 1},
		{"entry type zero", raft.LogCommand, append([]byte{0x00}, body...), 1},
		{"undecodable batch", raft.LogCommand, []byte{byte(EntryBatch), 0xff, 0xff, 0xff}, 1},
		{"unknown type flagged ignorable", raft.LogCommand, append([]byte{byte(IgnoreUnknownFlag | 0x05)}, body...), 0},
		{"ignorable flag alone", raft.LogCommand, []byte{byte(IgnoreUnknownFlag)}, 0},
		{"zero-length data", raft.LogCommand, nil, 0},
		{"configuration entry", raft.LogConfiguration, []byte("whatever"), 0},
		{"configuration entry holding a batch", raft.LogConfiguration, append([]byte{byte(EntryBatch)}, body...), 0},
		{"barrier entry", raft.LogBarrier, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply1(create("existing"))
			before := h.state()

			l := h.rawEntry(tt.typ, tt.data)
			rs := results(t, h.f.Apply(l))
			if tt.wantInvalid == 0 && rs != nil {
				t.Fatalf("response %v, want nil", rs)
			}
			if len(rs) != tt.wantInvalid {
				t.Fatalf("%d results, want %d: %v", len(rs), tt.wantInvalid, rs)
			}
			for _, r := range rs {
				wantErr(t, r, ReasonInvalidArgument)
			}
			if after := h.state(); after != before {
				t.Fatalf("bad entry changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if h.f.AppliedIndex() != l.Index {
				t.Fatalf("AppliedIndex = %d, want %d", h.f.AppliedIndex(), l.Index)
			}
			// The FSM carries on.
			wantErr(t, h.apply1(create("next")), "")
		})
	}
}

func TestApplyBatchResponses(t *testing.T) {
	// One response per entry, in order, each with one result per command;
	// non-command entries answer nil; AppliedIndex is the last entry's.
	h := newHarness(t)
	logs := []*raft.Log{
		h.entry(create("a"), create("b"), create("a")),
		h.rawEntry(raft.LogConfiguration, nil),
		h.entry(appendEv("a", ev("note", "x"))),
		h.rawEntry(raft.LogCommand, nil),
		h.entry(stop("b", "")),
	}
	out := h.f.ApplyBatch(logs)
	if len(out) != len(logs) {
		t.Fatalf("%d responses for %d entries", len(out), len(logs))
	}
	want := [][]Reason{{"", "", ReasonAlreadyExists}, nil, {""}, nil, {""}}
	for i, w := range want {
		rs := results(t, out[i])
		if len(rs) != len(w) {
			t.Fatalf("entry %d: %d results, want %d", i, len(rs), len(w))
		}
		for j := range rs {
			wantErr(t, rs[j], w[j])
		}
	}
	if h.f.AppliedIndex() != logs[len(logs)-1].Index {
		t.Fatalf("AppliedIndex = %d, want %d", h.f.AppliedIndex(), logs[len(logs)-1].Index)
	}
}

func TestEncodeBatchRoundTrip(t *testing.T) {
	cmds := []*fsmpb.Command{
		req("r1", at(5, create("s1"))),
		appendIf("s1", 0, ev("note", "x")),
		stop("s1", "why"),
	}
	data, err := EncodeBatch(cmds)
	if err != nil {
		t.Fatal(err)
	}
	if EntryType(data[0]) != EntryBatch {
		t.Fatalf("first byte %#x, want EntryBatch", data[0])
	}
	got, ignore, err := decodeEntry(data)
	if err != nil || ignore || len(got) != len(cmds) {
		t.Fatalf("decodeEntry = %d commands, ignore %v, err %v", len(got), ignore, err)
	}
	for i := range cmds {
		if !proto.Equal(got[i], cmds[i]) {
			t.Fatalf("command %d = %v, want %v", i, got[i], cmds[i])
		}
	}
	// expected_seq 0 survives the encoding (it is not "absent").
	if got[1].GetAppendEvents().ExpectedSeq == nil {
		t.Fatal("expected_seq 0 lost in encoding")
	}
}
