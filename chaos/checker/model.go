package checker

import (
	"fmt"
	"hash/maphash"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/fak-dev/fak/chaos/history"
)

// journal is one session's log in the model: an immutable cons list from the
// newest event back to the first. Appending allocates one node and shares the
// rest, so porcupine can keep earlier states in its cache without copying.
// The nil *journal is the empty journal.
type journal struct {
	prev  *journal
	value string
	n     uint64 // number of events, i.e. the seq of this event
	hash  uint64 // order-sensitive hash of all values up to this one
}

var hashSeed = maphash.MakeSeed()

func (j *journal) len() uint64 {
	if j == nil {
		return 0
	}
	return j.n
}

func (j *journal) sum() uint64 {
	if j == nil {
		return 0
	}
	return j.hash
}

func (j *journal) append(v string) *journal {
	h := j.sum()*0x9e3779b97f4a7c15 ^ maphash.String(hashSeed, v)
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 29
	return &journal{prev: j, value: v, n: j.len() + 1, hash: h}
}

// equal reports whether two journals hold the same values in the same order.
func (j *journal) equal(o *journal) bool {
	for j != o {
		if j == nil || o == nil || j.n != o.n || j.hash != o.hash || j.value != o.value {
			return false
		}
		j, o = j.prev, o.prev
	}
	return true
}

// equalValues reports whether the journal holds exactly vs.
func (j *journal) equalValues(vs []string) bool {
	if uint64(len(vs)) != j.len() {
		return false
	}
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i] != j.value {
			return false
		}
		j = j.prev
	}
	return true
}

// values returns the journal oldest first.
func (j *journal) values() []string {
	out := make([]string, j.len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = j.value
		j = j.prev
	}
	return out
}

// input is what a porcupine operation asked for.
type input struct {
	session  string
	kind     history.Kind
	value    string
	cas      bool
	expected uint64
}

// output is what the client was told. Only OK outcomes, CAS mismatches and
// Info appends reach the model.
type output struct {
	outcome  history.Outcome
	seq      uint64
	mismatch bool
	head     uint64
	values   []string
}

// meta travels with each operation into the visualization.
type meta struct {
	index int // position in the history given to Linearizable
	op    *history.Op
}

func step(state, in, out any) (bool, any) {
	j := state.(*journal)
	i := in.(*input)
	o := out.(*output)
	n := j.len()
	switch i.kind {
	case history.Read:
		return o.outcome == history.OK && j.equalValues(o.values), j
	case history.Append:
		switch {
		case o.outcome == history.Info:
			if i.cas && i.expected != n {
				return true, j // the compare failed: no effect
			}
			return true, j.append(i.value)
		case o.mismatch:
			return i.expected != n && o.head == n, j
		case o.outcome == history.OK:
			if (i.cas && i.expected != n) || o.seq != n+1 {
				return false, j
			}
			return true, j.append(i.value)
		}
	}
	return false, j
}

// partition splits a porcupine history by session, in session order.
func partition(ops []porcupine.Operation) [][]porcupine.Operation {
	by := map[string][]porcupine.Operation{}
	for _, op := range ops {
		s := op.Input.(*input).session
		by[s] = append(by[s], op)
	}
	ids := make([]string, 0, len(by))
	for s := range by {
		ids = append(ids, s)
	}
	sort.Strings(ids)
	out := make([][]porcupine.Operation, len(ids))
	for k, s := range ids {
		out[k] = by[s]
	}
	return out
}

// model is the porcupine model of fak session journals, partitioned per
// session.
var model = porcupine.Model{
	Partition: partition,
	Init:      func() any { return (*journal)(nil) },
	Step:      step,
	Equal:     func(a, b any) bool { return a.(*journal).equal(b.(*journal)) },
	Hash:      func(s any) uint64 { return s.(*journal).sum() },
	DescribeOperation: func(in, out any) string {
		return describeOperation(in.(*input), out.(*output))
	},
	DescribeState: func(s any) string {
		j := s.(*journal)
		return fmt.Sprintf("len %d %s", j.len(), describeValues(j.values()))
	},
	DescribeOperationMetadata: func(m any) string {
		mm, ok := m.(*meta)
		if !ok || mm == nil {
			return ""
		}
		op := mm.op
		s := fmt.Sprintf("history[%d] client %d", mm.index, op.Client)
		if op.Node != "" {
			s += " node " + op.Node
		}
		if op.RequestID != "" {
			s += " request " + op.RequestID
		}
		if op.Outcome == history.Info {
			s += fmt.Sprintf(" recorded call %d", op.Call)
		}
		if op.Error != "" {
			s += " error: " + op.Error
		}
		return s
	},
}

func describeOperation(i *input, o *output) string {
	var b strings.Builder
	switch i.kind {
	case history.Read:
		b.WriteString("read()")
	default:
		if i.cas {
			fmt.Fprintf(&b, "cas(%d, %q)", i.expected, i.value)
		} else {
			fmt.Fprintf(&b, "append(%q)", i.value)
		}
	}
	b.WriteString(" -> ")
	switch {
	case o.outcome == history.Info:
		b.WriteString("info (unknown)")
	case o.mismatch:
		fmt.Fprintf(&b, "mismatch, head %d", o.head)
	case i.kind == history.Read:
		fmt.Fprintf(&b, "%d values %s", len(o.values), describeValues(o.values))
	default:
		b.WriteString("seq " + strconv.FormatUint(o.seq, 10))
	}
	return b.String()
}

// describeValues prints a journal in full when it is short, otherwise its
// first few and last several values.
func describeValues(vs []string) string {
	const head, tail = 3, 10
	if len(vs) <= head+tail+1 {
		return fmt.Sprintf("%q", vs)
	}
	return fmt.Sprintf("%q … (%d more) … %q", vs[:head], len(vs)-head-tail, vs[len(vs)-tail:])
}

// infinity is the return time of operations whose outcome is unknown.
const infinity = math.MaxInt64
