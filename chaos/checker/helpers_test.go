package checker

import (
	"fmt"
	"math/rand/v2"
	"sort"

	"github.com/fak-dev/fak/chaos/history"
)

// Builders for hand-written histories. Times are arbitrary integers.

func appendOK(client int, session, value string, call, ret int64, seq uint64) history.Op {
	return history.Op{Client: client, Session: session, Kind: history.Append, Value: value,
		Outcome: history.OK, Seq: seq, Call: call, Return: ret}
}

func casOK(client int, session, value string, expected uint64, call, ret int64) history.Op {
	op := appendOK(client, session, value, call, ret, expected+1)
	op.CAS, op.ExpectedSeq = true, expected
	return op
}

func casMismatch(client int, session, value string, expected, head uint64, call, ret int64) history.Op {
	return history.Op{Client: client, Session: session, Kind: history.Append, Value: value,
		CAS: true, ExpectedSeq: expected, Outcome: history.Fail, Mismatch: true, HeadSeq: head,
		Call: call, Return: ret}
}

func appendInfo(client int, session, value string, call int64) history.Op {
	return history.Op{Client: client, Session: session, Kind: history.Append, Value: value,
		Outcome: history.Info, Call: call, Return: call + 1, Error: "timeout"}
}

func casInfo(client int, session, value string, expected uint64, call int64) history.Op {
	op := appendInfo(client, session, value, call)
	op.CAS, op.ExpectedSeq = true, expected
	return op
}

func appendFail(client int, session, value string, call, ret int64) history.Op {
	return history.Op{Client: client, Session: session, Kind: history.Append, Value: value,
		Outcome: history.Fail, Call: call, Return: ret, Error: "unavailable"}
}

func readOK(client int, session string, call, ret int64, values ...string) history.Op {
	return history.Op{Client: client, Session: session, Kind: history.Read,
		Outcome: history.OK, Values: values, Call: call, Return: ret}
}

func readInfo(client int, session string, call int64) history.Op {
	return history.Op{Client: client, Session: session, Kind: history.Read,
		Outcome: history.Info, Call: call, Return: call + 1}
}

// genSession simulates concurrent clients on one session's journal and
// returns a history that is linearizable by construction, together with the
// final journal. Each operation takes effect at a random instant inside its
// interval. Some appends end Info (half of them took effect) or Fail (no
// effect); a client that saw Info continues under a new id. infoPct is the
// percentage of operations that end Info. Client ids are allocated from
// *nextClient.
func genSession(rng *rand.Rand, session string, clients, nops, infoPct int, nextClient *int) ([]history.Op, []string) {
	type pending struct {
		op    history.Op
		lin   int64
		apply bool // an Info append that took effect
		owner int  // simulated worker
	}
	var ps []pending
	for w := range clients {
		t := rng.Int64N(20)
		for range nops / clients {
			call := t
			lin := call + 1 + rng.Int64N(40)
			ret := lin + 1 + rng.Int64N(40)
			t = ret + rng.Int64N(10)
			var op history.Op
			op.Session, op.Call, op.Return = session, call, ret
			switch x := rng.IntN(100); {
			case x < 35:
				op.Kind = history.Read
			case x < 75:
				op.Kind = history.Append
			default:
				op.Kind, op.CAS = history.Append, true
			}
			op.Outcome = history.OK
			apply := false
			switch x := rng.IntN(100); {
			case x < infoPct:
				op.Outcome, op.Error = history.Info, "timeout"
				apply = rng.IntN(2) == 0
			case x < infoPct+2 && op.Kind == history.Append:
				op.Outcome, op.Error = history.Fail, "unavailable"
			}
			ps = append(ps, pending{op: op, lin: lin, apply: apply, owner: w})
		}
	}
	// Apply in linearization order.
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].lin < ps[j].lin })
	var log []string
	for k := range ps {
		op := &ps[k].op
		n := uint64(len(log))
		if op.Kind == history.Read {
			if op.Outcome == history.OK {
				op.Values = append([]string(nil), log...)
			}
			continue
		}
		op.Value = fmt.Sprintf("%s/v%d", session, k)
		if op.CAS {
			switch rng.IntN(4) {
			case 0:
				op.ExpectedSeq = n + 1
			case 1:
				if n > 0 {
					op.ExpectedSeq = n - 1
				}
			default:
				op.ExpectedSeq = n
			}
		}
		switch op.Outcome {
		case history.Fail:
			continue
		case history.Info:
			if ps[k].apply && (!op.CAS || op.ExpectedSeq == n) {
				log = append(log, op.Value)
			}
			continue
		}
		if op.CAS && op.ExpectedSeq != n {
			op.Outcome, op.Mismatch, op.HeadSeq = history.Fail, true, n
			continue
		}
		log = append(log, op.Value)
		op.Seq = uint64(len(log))
	}
	// Client ids in call order per worker; a new id after each Info.
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].op.Call < ps[j].op.Call })
	ids := map[int]int{}
	ops := make([]history.Op, 0, len(ps))
	for _, p := range ps {
		id, ok := ids[p.owner]
		if !ok {
			id = *nextClient
			*nextClient++
		}
		p.op.Client = id
		if p.op.Outcome == history.Info {
			id = *nextClient
			*nextClient++
		}
		ids[p.owner] = id
		ops = append(ops, p.op)
	}
	return ops, log
}

// genHistory builds a history over many sessions, sorted by call time.
func genHistory(seed uint64, sessions, clients, opsPerSession int) ([]history.Op, map[string][]string) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	final := map[string][]string{}
	var all []history.Op
	next := 0
	for s := range sessions {
		id := fmt.Sprintf("s%02d", s)
		ops, log := genSession(rng, id, clients, opsPerSession, 4, &next)
		all = append(all, ops...)
		final[id] = log
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Call < all[j].Call })
	return all, final
}

// journals turns final values into journals of workload values only.
func journals(final map[string][]string) map[string]Journal {
	out := make(map[string]Journal, len(final))
	for id, vs := range final {
		out[id] = ValueJournal(vs...)
	}
	return out
}
