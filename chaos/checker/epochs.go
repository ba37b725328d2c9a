package checker

import (
	"encoding/json"
	"fmt"
)

// JournalEvent is one event of a session's final journal, as the epoch
// checker needs it.
type JournalEvent struct {
	Seq  uint64
	Kind string
	Text string
	Data []byte
}

// EpochResult is the verdict of Epochs.
type EpochResult struct {
	Ok         bool
	Violations []string
	Sessions   int
	Moves      int // cutovers
	Failed     int // move.failed + move.unsafe
	Turns      int
}

// Epochs checks the execution-epoch invariants of every journal (DESIGN.md
// §8), whatever moves, recoveries and faults happened:
//   - addresses have no gap;
//   - epoch.changed numbers strictly increase: at every address exactly one
//     epoch is current;
//   - every turn.started of the current epoch runs on that epoch's node, so
//     no runner of a retired epoch wrote after the switch;
//   - every input is started by at most one turn (none run twice);
//   - a cutover follows its move's restore, and moves never overlap.
func Epochs(journals map[string][]JournalEvent) EpochResult {
	r := EpochResult{Sessions: len(journals)}
	bad := func(format string, args ...any) { r.Violations = append(r.Violations, fmt.Sprintf(format, args...)) }
	for id, evs := range journals {
		var epoch uint64
		node := ""
		started := map[uint64]uint64{} // input seq → turn.started seq
		openMove, restored := "", false
		for i, e := range evs {
			if e.Seq != uint64(i+1) {
				bad("%s: address gap: #%d where #%d was due", id, e.Seq, i+1)
				break
			}
			var d map[string]json.RawMessage
			_ = json.Unmarshal(e.Data, &d)
			str := func(k string) string {
				var s string
				_ = json.Unmarshal(d[k], &s)
				return s
			}
			num := func(k string) uint64 {
				var n uint64
				_ = json.Unmarshal(d[k], &n)
				return n
			}
			switch e.Kind {
			case "epoch.changed":
				n := num("epoch")
				if n <= epoch {
					bad("%s #%d: epoch %d after epoch %d (two current epochs)", id, e.Seq, n, epoch)
				}
				epoch = n
				var p struct {
					Node string `json:"node"`
				}
				_ = json.Unmarshal(d["placement"], &p)
				node = p.Node
			case "turn.started":
				r.Turns++
				if n := str("node"); n != "" && node != "" && n != node {
					bad("%s #%d: a turn started on %s while epoch %d runs on %s (a retired runner wrote)", id, e.Seq, n, epoch, node)
				}
				in := num("input_seq")
				if prev, dup := started[in]; dup && str("status") == "" {
					bad("%s #%d: input #%d started again (first at #%d)", id, e.Seq, in, prev)
				}
				started[in] = e.Seq
			case "move.requested":
				if openMove != "" {
					bad("%s #%d: move %s requested while %s is open", id, e.Seq, str("move_id"), openMove)
				}
				openMove, restored = str("move_id"), false
			case "move.restored":
				if str("move_id") == openMove {
					restored = true
				}
			case "move.cutover":
				r.Moves++
				if str("move_id") != openMove || !restored {
					bad("%s #%d: cutover of move %s without its restore", id, e.Seq, str("move_id"))
				}
				openMove = ""
			case "move.failed", "move.unsafe":
				r.Failed++
				openMove = ""
			}
		}
	}
	r.Ok = len(r.Violations) == 0
	return r
}

// Summary is one line, plus the first violations.
func (r EpochResult) Summary() string {
	return Summarize("epochs", r.Violations, fmt.Sprintf("%d session(s), %d moves cut over, %d failed, %d turns", r.Sessions, r.Moves, r.Failed, r.Turns))
}
