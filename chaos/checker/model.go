package checker

import (
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/fak-dev/fak/chaos/history"
)

// journal is one session's log in the model: an immutable cons list from the
// newest event back to the first. Appending allocates one node and shares the
// rest, so porcupine can keep earlier states in its cache without copying.
// The nil *journal is the empty journal. A node is either a workload value
// or an event the fleet wrote itself (other), which no client op appends:
// the model takes those from the final journal's addresses (see step).
type journal struct {
	prev  *journal
	value string
	other bool
	n     uint64 // number of events, i.e. the seq of this event
	hash  uint64 // order-sensitive hash of all events up to this one
}

// otherMark stands for a fleet-written event in the hash; workload values
// never contain NUL.
const otherMark = "\x00other"

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
	return &journal{prev: j, value: v, n: j.len() + 1, hash: j.mix(v)}
}

// appendOther adds an event the fleet wrote itself.
func (j *journal) appendOther() *journal {
	return &journal{prev: j, other: true, n: j.len() + 1, hash: j.mix(otherMark)}
}

func (j *journal) mix(v string) uint64 {
	h := j.sum()*0x9e3779b97f4a7c15 ^ maphash.String(hashSeed, v)
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 29
	return h
}

// others is the set of seqs the final journal of one session gives to
// events the fleet wrote itself.
type others map[uint64]bool

// upTo extends j with the fleet's events up to seq to; false if the final
// journal has a workload value (or nothing) in between, or j is past to.
func (o others) upTo(j *journal, to uint64) (*journal, bool) {
	for j.len() < to {
		if !o[j.len()+1] {
			return j, false
		}
		j = j.appendOther()
	}
	return j, j.len() == to
}

// all extends j with every fleet event the final journal places right
// after it: the only place the next workload value can go.
func (o others) all(j *journal) *journal {
	for o[j.len()+1] {
		j = j.appendOther()
	}
	return j
}

// equal reports whether two journals hold the same values in the same order.
func (j *journal) equal(o *journal) bool {
	for j != o {
		if j == nil || o == nil || j.n != o.n || j.hash != o.hash || j.value != o.value || j.other != o.other {
			return false
		}
		j, o = j.prev, o.prev
	}
	return true
}

// equalValues reports whether the journal's workload values are exactly vs,
// and, when seqs is not nil, at exactly those seqs.
func (j *journal) equalValues(vs []string, seqs []uint64) bool {
	i := len(vs) - 1
	for ; j != nil; j = j.prev {
		if j.other {
			continue
		}
		if i < 0 || vs[i] != j.value || (seqs != nil && (i >= len(seqs) || seqs[i] != j.n)) {
			return false
		}
		i--
	}
	return i == -1
}

// values returns the journal's workload values oldest first.
func (j *journal) values() []string {
	var out []string
	for ; j != nil; j = j.prev {
		if !j.other {
			out = append(out, j.value)
		}
	}
	slices.Reverse(out)
	return out
}

// input is what a porcupine operation asked for.
type input struct {
	session  string
	kind     history.Kind
	value    string
	cas      bool
	expected uint64
	others   others // where the session's fleet events are (final journal)
}

// output is what the client was told. Only OK outcomes, CAS mismatches and
// Info appends reach the model.
type output struct {
	outcome  history.Outcome
	seq      uint64
	mismatch bool
	head     uint64
	values   []string
	seqs     []uint64 // of values; nil for a read recorded without addresses
}

// meta travels with each operation into the visualization.
type meta struct {
	index int // position in the history given to Linearizable
	op    *history.Op
}

// step applies one operation. Events the fleet wrote itself (a recovery
// move's, say) appear in a journal at any time, in address order, at the
// seqs the final journal gives them: an observed head absorbs those up to
// it, and a workload value lands only after every one of them in its way.
func step(state, in, out any) (bool, any) {
	j := state.(*journal)
	i := in.(*input)
	o := out.(*output)
	switch i.kind {
	case history.Read:
		if o.outcome != history.OK {
			return false, j
		}
		if o.seqs == nil { // recorded without addresses: values only
			return j.equalValues(o.values, nil), j
		}
		k, ok := i.others.upTo(j, o.head)
		return ok && k.equalValues(o.values, o.seqs), k
	case history.Append:
		full := i.others.all(j)
		switch {
		case o.outcome == history.Info:
			if i.cas && i.expected != full.len() {
				return true, j // the compare failed: no effect
			}
			return true, full.append(i.value)
		case o.mismatch:
			k, ok := i.others.upTo(j, o.head)
			return ok && i.expected != o.head, k
		case o.outcome == history.OK:
			if (i.cas && i.expected != full.len()) || o.seq != full.len()+1 {
				return false, j
			}
			return true, full.append(i.value)
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
