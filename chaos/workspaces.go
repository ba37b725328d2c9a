package chaos

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fak-dev/fak/chaos/checker"
	"github.com/fak-dev/fak/node/runner/model/modeltest"
)

// Workspaces under faults (issue 16): every model turn reads a witness
// file from the session's workspace with the model loop's read_file and
// writes the next link of a hash chain with write_file, before the fake
// model answers. The journal holds both — what each turn read, what each
// wrote — so a checker that sees only the journal (what any client sees)
// can tell whether the workspace a turn ran in is the one the session's
// last write left: in particular, whether the first turn after every
// cutover found on its new node exactly the workspace its source
// checkpointed. Nothing reaches into a node's disk.

const witnessFile = "witness.txt"

// witnessNext is the link a turn with input writes after reading prev.
func witnessNext(prev, input string) string {
	sum := sha256.Sum256([]byte(prev + "\x00" + input))
	return hex.EncodeToString(sum[:])
}

// witnessReply is the fake model's answer within a turn: read the witness,
// then write its next link, then answer (modelReply).
func witnessReply(r modeltest.Request) modeltest.Reply {
	msgs := r.Messages()
	user := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			user = i
			break
		}
	}
	input := r.LastUserText()
	if user < 0 || len(msgs)-1 == user || msgs[len(msgs)-1].Role != "tool" {
		return modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "read_file", Arguments: `{"path":"` + witnessFile + `"}`}}}
	}
	last := msgs[len(msgs)-1]
	if witnessCallName(msgs[user+1:], last.ToolCallID) == "read_file" {
		args, _ := json.Marshal(map[string]string{"path": witnessFile, "content": witnessNext(witnessRead(last.Content), input)})
		return modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "write_file", Arguments: string(args)}}}
	}
	return modeltest.Reply{Text: modelReply(input), TokensPerSecond: modelTokensPerSecond}
}

// witnessCallName is the tool the call id names among msgs' tool calls.
func witnessCallName(msgs []modeltest.Message, id string) string {
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if c.ID == id {
				return c.Name
			}
		}
	}
	return ""
}

// witnessRead is the witness a read_file result shows: the file's content,
// or "" when it cannot be read (no file yet: "error: stat …").
func witnessRead(result string) string {
	if strings.HasPrefix(result, "error: ") {
		return ""
	}
	return result
}

// WorkspaceStats is what the witness checker saw.
type WorkspaceStats struct {
	// Reads counts the turns' witness reads checked; AfterMoves those
	// that were the first after a move's cutover (the carried workspace),
	// AfterRecoveries after a recovery (a copy, or an empty workspace).
	Reads           int      `json:"reads"`
	AfterMoves      int      `json:"after_moves"`
	AfterRecoveries int      `json:"after_recoveries"`
	Violations      []string `json:"violations,omitempty"`
}

// workspaceWitness checks the model sessions' witness chain. A turn must
// read what the session's last journaled write left — or, if a write was
// called and its result never journaled (its node died in between), that
// write's content or a file it truncated. After a recovery the workspace
// may legitimately be an older copy (the journal says so): any state the
// chain ever had is accepted there, and the chain goes on from it.
func workspaceWitness(journals map[string][]checker.JournalEvent, ids []string) WorkspaceStats {
	var st WorkspaceStats
	for _, id := range ids {
		w := witnessState{history: map[string]bool{"": true}}
		calls := map[string]witnessCall{}
		for _, e := range journals[id] {
			switch e.Kind {
			case "move.cutover":
				var f struct {
					MoveID string `json:"move_id"`
					Cause  string `json:"cause"`
					From   string `json:"from"`
					To     string `json:"to"`
				}
				_ = json.Unmarshal(e.Data, &f)
				w.cutover = fmt.Sprintf("move %s %s → %s (%s) at #%d", f.MoveID, f.From, f.To, f.Cause, e.Seq)
				// A recovery's latitude lasts until a turn reads the
				// workspace: a move after it carries the recovered copy,
				// whatever state of the chain that copy held.
				w.recovered = w.recovered || f.Cause == "recovery"
				w.moved = !w.recovered
			case "tool.call":
				var c struct {
					ID        string `json:"id"`
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				}
				_ = json.Unmarshal(e.Data, &c)
				var args struct {
					Content string `json:"content"`
				}
				_ = json.Unmarshal([]byte(c.Arguments), &args)
				calls[c.ID] = witnessCall{name: c.Name, content: args.Content}
				if c.Name == "write_file" {
					w.inflight = append(w.inflight, args.Content)
					w.history[args.Content] = true
				}
			case "tool.result":
				var r struct {
					ID string `json:"id"`
					OK bool   `json:"ok"`
				}
				_ = json.Unmarshal(e.Data, &r)
				c := calls[r.ID]
				switch c.name {
				case "write_file":
					if r.OK {
						w.confirmed, w.inflight = c.content, nil
					}
				case "read_file":
					seen := witnessRead(e.Text)
					if !r.OK {
						seen = ""
					}
					st.Reads++
					if why := w.check(seen); why != "" {
						st.Violations = append(st.Violations, fmt.Sprintf("%s #%d: %s", id, e.Seq, why))
					}
					switch {
					case w.recovered:
						st.AfterRecoveries++
					case w.moved:
						st.AfterMoves++
					}
					w.confirmed, w.inflight, w.moved, w.recovered = seen, nil, false, false
				}
			}
		}
	}
	return st
}

type witnessCall struct{ name, content string }

type witnessState struct {
	confirmed string   // what the last journaled write (or read) showed
	inflight  []string // writes called since, their results not journaled
	history   map[string]bool
	cutover   string // the last cutover, for the message
	moved     bool   // a move cut over since the last read
	recovered bool   // a recovery cut over since the last read
}

// check says why seen cannot be the workspace's witness now ("" if it can).
func (w *witnessState) check(seen string) string {
	if w.recovered {
		if w.history[seen] {
			return ""
		}
		return fmt.Sprintf("after %s the workspace's witness is %q, a state the session never had", w.cutover, clipWitness(seen))
	}
	if seen == w.confirmed || len(w.inflight) > 0 && (seen == "" || seen == w.inflight[len(w.inflight)-1]) {
		return ""
	}
	where := "the last write journaled left"
	if w.moved {
		where = "after " + w.cutover + " the workspace the source checkpointed held"
	}
	return fmt.Sprintf("a turn read the workspace's witness %q; %s %q", clipWitness(seen), where, clipWitness(w.confirmed))
}

func clipWitness(s string) string {
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}
