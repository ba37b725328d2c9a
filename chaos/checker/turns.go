package checker

import (
	"encoding/json"
	"fmt"
)

// TurnResult is the verdict of Turns.
type TurnResult struct {
	Ok          bool
	Violations  []string
	Sessions    int
	Inputs      int
	Answered    int // inputs whose turn completed (any status)
	Interrupted int // turns closed as interrupted (a runner died, a move)
}

// Turns checks that every input of a session is answered exactly once and
// that no turn is answered by two epochs, whatever was killed or moved:
//   - every input gets exactly one turn.started and one turn.completed
//     naming it (after the run has settled, none is left unanswered);
//   - output, tool and approval events come only inside a turn, and only
//     from the epoch the turn started in: once the epoch changes, the only
//     event of the old turn may be its closing turn.completed, as
//     interrupted (the next runner closes what a dead one left open).
//
// Turns that reach two epochs are counted as interrupted, not violations,
// when they close that way.
func Turns(journals map[string][]JournalEvent) TurnResult {
	r := TurnResult{Sessions: len(journals)}
	bad := func(format string, args ...any) { r.Violations = append(r.Violations, fmt.Sprintf(format, args...)) }
	for id, evs := range journals {
		inputs := map[uint64]bool{}
		started := map[uint64]uint64{}   // input seq → turn.started seq
		completed := map[uint64]uint64{} // input seq → turn.completed seq
		var open uint64                  // input of the running turn (0: none)
		var epoch, openEpoch uint64
		for _, e := range evs {
			var d struct {
				InputSeq uint64 `json:"input_seq"`
				Status   string `json:"status"`
				Epoch    uint64 `json:"epoch"`
			}
			_ = json.Unmarshal(e.Data, &d)
			switch e.Kind {
			case "epoch.changed":
				epoch = d.Epoch
			case "input":
				inputs[e.Seq] = true
				r.Inputs++
			case "turn.started":
				if open != 0 {
					bad("%s #%d: turn of input #%d started while the turn of #%d runs", id, e.Seq, d.InputSeq, open)
				}
				if prev, dup := started[d.InputSeq]; dup {
					bad("%s #%d: input #%d answered twice (first turn at #%d)", id, e.Seq, d.InputSeq, prev)
				}
				if !inputs[d.InputSeq] {
					bad("%s #%d: a turn for #%d, which is not an earlier input", id, e.Seq, d.InputSeq)
				}
				started[d.InputSeq] = e.Seq
				open, openEpoch = d.InputSeq, epoch
				if d.Status != "" { // started and closed in one write (refused)
					completed[d.InputSeq] = e.Seq
				}
			case "turn.completed":
				switch {
				case open == 0:
					bad("%s #%d: turn.completed with no turn running", id, e.Seq)
				case d.InputSeq != open:
					bad("%s #%d: turn.completed names input #%d; the running turn is #%d's", id, e.Seq, d.InputSeq, open)
				case openEpoch != epoch && d.Status != "interrupted":
					bad("%s #%d: the turn of #%d started in epoch %d was answered (%s) in epoch %d", id, e.Seq, open, openEpoch, d.Status, epoch)
				}
				if d.Status == "interrupted" {
					r.Interrupted++
				}
				completed[open] = e.Seq
				open = 0
			case "output", "tool.call", "tool.result", "approval.requested":
				switch {
				case open == 0:
					bad("%s #%d: %s outside a turn", id, e.Seq, e.Kind)
				case openEpoch != epoch:
					bad("%s #%d: %s for the turn of #%d (epoch %d) written in epoch %d", id, e.Seq, e.Kind, open, openEpoch, epoch)
				}
			}
		}
		for in := range inputs {
			if _, ok := completed[in]; ok {
				r.Answered++
				continue
			}
			if _, ok := started[in]; ok {
				bad("%s: the turn of input #%d never completed", id, in)
			} else {
				bad("%s: input #%d was never answered", id, in)
			}
		}
	}
	r.Ok = len(r.Violations) == 0
	return r
}

// Summary is one line, plus the first violations.
func (r TurnResult) Summary() string {
	return Summarize("turns", r.Violations, fmt.Sprintf("%d session(s), %d inputs, %d answered, %d interrupted", r.Sessions, r.Inputs, r.Answered, r.Interrupted))
}
