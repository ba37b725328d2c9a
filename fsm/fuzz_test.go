package fsm

import (
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// FuzzApply feeds one log entry — a batch as the leader encodes it, or any
// bytes at all — to two FSMs holding the same state (the first entries of
// fullLog: nodes, sessions, attachments, leases, turns, moves) and checks
// that nothing panics, that both return the same results and end with the
// same content, and that the same entry delivered again returns the same
// number of results. The seeds are every entry of fullLog: each command
// type, mutated from there.
func FuzzApply(f *testing.F) {
	log, _, _ := fullLog(f)
	for _, l := range log {
		f.Add(l.Data)
	}
	f.Add([]byte{})
	f.Add([]byte{0xff, 0x00})
	prefix := log[:min(len(log), 16)]
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := newHarness(t), newHarness(t)
		for _, h := range []*harness{a, b} {
			for _, l := range prefix {
				h.f.Apply(l)
			}
		}
		entry := &raft.Log{Index: prefix[len(prefix)-1].Index + 1, Term: 1, Type: raft.LogCommand, Data: data}
		ra, rb := a.f.Apply(entry), b.f.Apply(entry)
		if !sameResponse(ra, rb) {
			t.Fatalf("the same entry, two results:\n%v\n%v", ra, rb)
		}
		if d := stateDiff(t, a.f, b.f); d != "" {
			t.Fatalf("two FSMs fed the same entries differ: %s", d)
		}
		again := &raft.Log{Index: entry.Index + 1, Term: 1, Type: raft.LogCommand, Data: data}
		if r1, r2 := countResults(ra), countResults(a.f.Apply(again)); r1 != r2 {
			t.Fatalf("delivered again: %d results, first %d", r2, r1)
		}
	})
}

func sameResponse(x, y interface{}) bool {
	xr, xok := x.([]*fsmpb.Result)
	yr, yok := y.([]*fsmpb.Result)
	if xok != yok || len(xr) != len(yr) {
		return false
	}
	if !xok {
		xe, _ := x.(error)
		ye, _ := y.(error)
		return (xe == nil) == (ye == nil) && (xe == nil || xe.Error() == ye.Error())
	}
	for i := range xr {
		if !proto.Equal(xr[i], yr[i]) {
			return false
		}
	}
	return true
}

func countResults(v interface{}) int {
	rs, _ := v.([]*fsmpb.Result)
	return len(rs)
}
