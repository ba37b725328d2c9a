package exec

import (
	"encoding/json"
	"fmt"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
)

// contextPage is how many events one journal read asks for.
const contextPage = 512

// contextEvent is one journal event as a jsonl turn line carries it. Data
// that is JSON is passed as JSON, anything else as a string.
type contextEvent struct {
	Seq  uint64 `json:"seq"`
	Kind string `json:"kind"`
	Text string `json:"text"`
	Data any    `json:"data,omitempty"`
}

func newContextEvent(ev *fsmpb.Event) contextEvent {
	ce := contextEvent{Seq: ev.Seq, Kind: ev.Kind, Text: ev.Text}
	switch {
	case len(ev.Data) == 0:
	case json.Valid(ev.Data):
		ce.Data = json.RawMessage(append([]byte(nil), ev.Data...))
	default:
		ce.Data = string(ev.Data)
	}
	return ce
}

// contextReader reads the epoch's context, the journal after the last
// reset boundary, and keeps what it has read: committed events never
// change, so each turn reads only what came since the last one.
type contextReader struct {
	journal     runner.Journal
	next        uint64 // the next seq to read
	events      []contextEvent
	lastStarted int // index in events of the last turn.started read; -1: none
}

func newContextReader(j runner.Journal, resetSeq uint64) contextReader {
	return contextReader{journal: j, next: resetSeq + 1, lastStarted: -1}
}

// forTurn returns the context of the turn serving the input at seq: the
// events after the reset boundary up to the turn's own turn.started, which
// is the last one in the journal (the turn is running, and the runner
// wrote it before handing the turn over), without the inputs queued after
// seq, which later turns answer. So an input typed while the previous turn
// ran sees that turn's answer, and the context depends only on the
// journal: a restarted runner or a move's destination builds the same one.
func (c *contextReader) forTurn(seq uint64) ([]contextEvent, error) {
	for {
		evs, err := c.journal.Events(c.next, contextPage)
		if err != nil {
			return nil, fmt.Errorf("reading the session's context: %w", err)
		}
		before := c.next
		for _, ev := range evs {
			if ev.Seq < c.next {
				continue
			}
			if ev.Kind == fsm.KindTurnStarted {
				c.lastStarted = len(c.events)
			}
			c.events = append(c.events, newContextEvent(ev))
			c.next = ev.Seq + 1
		}
		if c.next == before {
			break // the head
		}
	}
	end := len(c.events)
	if c.lastStarted >= 0 && c.events[c.lastStarted].Seq > seq {
		end = c.lastStarted
	}
	out := make([]contextEvent, 0, end)
	found := false
	for _, e := range c.events[:end] {
		if e.Kind == fsm.KindInput && e.Seq > seq {
			continue
		}
		found = found || e.Seq == seq
		out = append(out, e)
	}
	if !found {
		return nil, fmt.Errorf("reading the session's context: input %d is not in the journal after the reset boundary", seq)
	}
	return out, nil
}
