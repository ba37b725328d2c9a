package fsm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Each benchmarked command is what a leader proposes for one client append:
// a fresh request id, a leader-stamped time and one 256-byte event. Encoding
// the entries is part of the measured loop; it is small next to the bbolt
// transaction.

var benchText = strings.Repeat("x", 256)

// benchCmd is the n-th append of the benchmark, to session id.
func benchCmd(n int, id string) *fsmpb.Command {
	return &fsmpb.Command{
		RequestId:    fmt.Sprintf("bench-%d", n),
		TimeUnixNano: t0 + int64(n)*1000,
		Body: &fsmpb.Command_AppendEvents{AppendEvents: &fsmpb.AppendEvents{
			SessionId: id,
			Events:    []*fsmpb.EventInput{{Kind: KindNote, Text: benchText}},
		}},
	}
}

func benchSessions(b *testing.B, h *harness, n int) []string {
	ids := make([]string, n)
	var cmds []*fsmpb.Command
	for i := range ids {
		ids[i] = fmt.Sprintf("session-%03d", i)
		cmds = append(cmds, at(t0, create(ids[i])))
	}
	for _, r := range h.apply(cmds...) {
		wantErr(b, r, "")
	}
	return ids
}

func encode(b *testing.B, cmds ...*fsmpb.Command) []byte {
	data, err := EncodeBatch(cmds)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkApplyAppend applies one entry per Apply, holding one append of
// one event.
func BenchmarkApplyAppend(b *testing.B) {
	h := newHarness(b)
	id := benchSessions(b, h, 1)[0]
	n := 0
	for b.Loop() {
		h.index++
		l := &raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: encode(b, benchCmd(n, id))}
		if rs := h.f.Apply(l).([]*fsmpb.Result); rs[0].Error != nil {
			b.Fatal(rs[0].Error)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkApplyBatch applies 64 entries per ApplyBatch, each holding 16
// commands, each an append of one event to one of 100 sessions.
func BenchmarkApplyBatch(b *testing.B) {
	const entries, perEntry = 64, 16
	h := newHarness(b)
	ids := benchSessions(b, h, 100)
	logs := make([]*raft.Log, entries)
	cmds := make([]*fsmpb.Command, perEntry)
	n := 0
	for b.Loop() {
		for e := range logs {
			for c := range cmds {
				cmds[c] = benchCmd(n, ids[n%len(ids)])
				n++
			}
			h.index++
			logs[e] = &raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: encode(b, cmds...)}
		}
		for _, out := range h.f.ApplyBatch(logs) {
			if rs := out.([]*fsmpb.Result); rs[perEntry-1].Error != nil {
				b.Fatal(rs[perEntry-1].Error)
			}
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}
