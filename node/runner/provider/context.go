package provider

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// contextPage is how many events one journal read asks for.
const contextPage = 512

// conversationHeader opens the conversation a new thread's first prompt
// carries.
const conversationHeader = "Conversation so far (from the fak journal; your earlier thread is not available):\n"

// newThreadPrompt is the first prompt of a new thread: the input, after
// the conversation the journal holds since the last reset when earlier
// turns ran (on another provider, on a thread this node does not have, or
// before a runtime restart lost the thread), so the agent does not start
// blind. It also returns how many earlier turns that conversation holds.
func (rt *runtime) newThreadPrompt(in *fsmpb.Event) (string, int, error) {
	conv, turns, err := rt.conversation(in.Seq)
	if err != nil || turns == 0 {
		return in.Text, 0, err
	}
	return conversationHeader + conv + "\nNow: " + in.Text, turns, nil
}

// pastTurn is one earlier turn: the input it served and the text it
// answered with.
type pastTurn struct {
	input  string
	answer strings.Builder
	status string // turn.completed's status when not "completed"
}

// conversation renders the turns the journal holds before the one serving
// the input at seq, as "user:" and "assistant:" lines, keeping its last
// maxPromptPrefix bytes. Turns are told apart as the FSM starts them: each
// turn.started serves the oldest queued input, so an input queued while a
// turn ran follows that turn's answer.
func (rt *runtime) conversation(seq uint64) (string, int, error) {
	var (
		queued  []*fsmpb.Event
		turns   []*pastTurn
		current *pastTurn
	)
	next := rt.ep.ResetSeq + 1
read:
	for {
		evs, err := rt.journal.Events(next, contextPage)
		if err != nil {
			return "", 0, fmt.Errorf("reading the session's journal: %w", err)
		}
		before := next
		for _, ev := range evs {
			if ev.Seq < next {
				continue
			}
			next = ev.Seq + 1
			switch ev.Kind {
			case fsm.KindInput:
				if ev.Seq < seq { // not the turn's own input, nor one queued after it
					queued = append(queued, ev)
				}
			case fsm.KindTurnStarted:
				if len(queued) == 0 {
					break read // the turn serving seq
				}
				current = &pastTurn{input: queued[0].Text}
				queued = queued[1:]
				turns = append(turns, current)
			case fsm.KindOutput:
				if current != nil {
					current.answer.WriteString(ev.Text)
				}
			case fsm.KindTurnCompleted:
				if current != nil {
					current.status = turnStatus(ev.Data)
				}
				current = nil
			}
		}
		if next == before {
			break // the head
		}
	}
	if len(turns) == 0 {
		return "", 0, nil
	}
	var b strings.Builder
	for _, t := range turns {
		b.WriteString("user: " + t.input + "\n")
		answer := strings.TrimSpace(t.answer.String())
		switch {
		case answer != "" && t.status != "":
			b.WriteString("assistant: " + answer + "\n(the turn " + t.status + ")\n")
		case answer != "":
			b.WriteString("assistant: " + answer + "\n")
		case t.status != "":
			b.WriteString("(the turn " + t.status + " without an answer)\n")
		}
	}
	return keepLast(b.String(), maxPromptPrefix), len(turns), nil
}

// turnStatus is turn.completed's status unless it is "completed".
func turnStatus(data []byte) string {
	var f struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(data, &f) != nil || f.Status == "completed" {
		return ""
	}
	return f.Status
}

// keepLast keeps the last n bytes of s, from a line's start when one
// begins in them, marking the cut.
func keepLast(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := len(s) - n
	if i := strings.IndexByte(s[cut:], '\n'); i >= 0 && i < len(s)-cut-1 {
		cut += i + 1
	} else {
		for cut < len(s) && s[cut]&0xC0 == 0x80 {
			cut++ // not inside a character
		}
	}
	return "[… earlier conversation cut]\n" + s[cut:]
}
