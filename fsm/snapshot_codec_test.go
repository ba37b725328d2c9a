package fsm

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// withRules is a node record whose build advertises rule version v.
func withRules(name string, v uint32) *fsmpb.NodeRecord {
	n := nodeRecord(name)
	n.RuleVersion = v
	return n
}

func TestSnapshotCompressedOnlyWhenEveryVoterReadsIt(t *testing.T) {
	voters := []string{"n1", "n2", "n3"}
	tests := []struct {
		name    string
		voters  func() ([]string, error)
		records []*fsmpb.NodeRecord
		want    bool
	}{
		{"no voters function (a scratch fsm)", nil, []*fsmpb.NodeRecord{withRules("n1", 2)}, false},
		{"every voter advertises 2",
			func() ([]string, error) { return voters, nil },
			[]*fsmpb.NodeRecord{withRules("n1", 2), withRules("n2", 2), withRules("n3", 2)}, true},
		{"one voter still on 1",
			func() ([]string, error) { return voters, nil },
			[]*fsmpb.NodeRecord{withRules("n1", 2), withRules("n2", 1), withRules("n3", 2)}, false},
		{"one voter without a record",
			func() ([]string, error) { return voters, nil },
			[]*fsmpb.NodeRecord{withRules("n1", 2), withRules("n2", 2)}, false},
		{"an old non-voter does not hold it back",
			func() ([]string, error) { return voters[:2], nil },
			[]*fsmpb.NodeRecord{withRules("n1", 2), withRules("n2", 2), withRules("n3", 1)}, true},
		{"voters unknown",
			func() ([]string, error) { return nil, errors.New("raft shut down") },
			[]*fsmpb.NodeRecord{withRules("n1", 2), withRules("n2", 2), withRules("n3", 2)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			if tt.voters != nil {
				h.f.SetSnapshotVoters(tt.voters)
			}
			for _, r := range tt.records {
				wantErr(t, h.apply1(registerNode(r)), "")
			}
			h.apply(create("s1"), appendEv("s1", ev("note", strings.Repeat("a transcript line\n", 500))))
			b := snapshotBytes(t, h.f)
			if got := bytes.HasPrefix(b, zstdMagic); got != tt.want {
				t.Fatalf("compressed = %v, want %v", got, tt.want)
			}
			// Either form restores to the same state.
			r := newHarness(t)
			if err := restoreBytes(r.f, b); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if got, want := dump(t, r.f, true), dump(t, h.f, true); got != want {
				t.Fatalf("restored database differs:\n%s", firstDiff(got, want))
			}
		})
	}
}

func TestCompressedSnapshotIsSmallerAndRejectsDamage(t *testing.T) {
	h := newHarness(t)
	h.f.SetSnapshotVoters(func() ([]string, error) { return []string{"n1"}, nil })
	h.apply1(registerNode(withRules("n1", SnapshotCompressionRules)))
	h.apply1(create("s1"))
	for i := range 200 {
		h.apply1(appendEv("s1", ev("note", strings.Repeat("func main() { fmt.Println(\"hello\") }\n", 20+i%7))))
	}
	compressed := snapshotBytes(t, h.f)
	h.f.voters.Store(nil)
	plain := snapshotBytes(t, h.f)
	if !bytes.HasPrefix(compressed, zstdMagic) || bytes.HasPrefix(plain, zstdMagic) {
		t.Fatal("want one compressed and one plain snapshot")
	}
	if len(compressed)*4 > len(plain) {
		t.Fatalf("compressed snapshot is %d bytes for a %d-byte database: want at least 4× smaller", len(compressed), len(plain))
	}
	before := dump(t, h.f, true)
	for name, b := range map[string][]byte{
		"truncated":     compressed[:len(compressed)/2],
		"one byte less": compressed[:len(compressed)-1],
		"flipped byte":  flipByte(compressed, len(compressed)/2),
		"magic only":    compressed[:4],
	} {
		if err := restoreBytes(h.f, b); err == nil {
			t.Errorf("%s: Restore accepted a damaged compressed snapshot", name)
		}
		if got := dump(t, h.f, true); got != before {
			t.Fatalf("%s: failed restore changed the database", name)
		}
	}
}

// pacedMemSink counts the state a compressed snapshot reports copying.
type pacedMemSink struct {
	memSink
	state int
}

func (s *pacedMemSink) PaceState(n int) { s.state += n }

// A compressed snapshot reports every byte of the state it copies to a
// sink that paces by them; the bytes written are far fewer.
func TestCompressedSnapshotIsPacedByState(t *testing.T) {
	h := newHarness(t)
	h.f.SetSnapshotVoters(func() ([]string, error) { return []string{"n1"}, nil })
	h.apply1(registerNode(withRules("n1", SnapshotCompressionRules)))
	h.apply1(create("s1"))
	for range 100 {
		h.apply1(appendEv("s1", ev("note", strings.Repeat("log line\n", 100))))
	}
	state, err := h.f.StateBytes()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var sink pacedMemSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if int64(sink.state) != state {
		t.Fatalf("paced %d bytes of state, want the database's %d", sink.state, state)
	}
	if sink.Len() >= sink.state/4 {
		t.Fatalf("wrote %d bytes for %d of state", sink.Len(), sink.state)
	}
}

func flipByte(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0xff
	return c
}
