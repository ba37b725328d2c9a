package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/chaos/checker"
)

// ModelStats is what the model workload did, for the report.
type ModelStats struct {
	// Off says why the run had no model sessions ("" when it had).
	Off      string `json:"off,omitempty"`
	Sessions int    `json:"sessions"`
	// Inputs the model clients submitted: acknowledged, certainly
	// refused, and of unknown outcome.
	Sent     int64 `json:"sent"`
	Acked    int64 `json:"acked"`
	Refused  int64 `json:"refused"`
	Unknown  int64 `json:"unknown"`
	Requests int   `json:"requests"` // chat completions the fake server received
	// LeaseSessions are the lease workload's (echo) sessions, checked by
	// Turns as well.
	LeaseSessions int `json:"lease_sessions"`
	// Settle is how long the sessions took, after the final restart, to
	// have no queued input and no turn running; Unsettled the ones that
	// still had at the deadline.
	Settle    time.Duration `json:"settle"`
	Unsettled []string      `json:"unsettled,omitempty"`
	// Answers counts the model sessions' completed turns whose output was
	// checked against the fake model's reply; AnswerViolations lists those
	// that differ.
	Answers          int      `json:"answers"`
	AnswerViolations []string `json:"answer_violations,omitempty"`
	// Moves counts the model sessions' epoch changes (moves that cut
	// over), Recoveries the moves the fleet itself started because a
	// session's node was down.
	Moves      int `json:"moves"`
	Recoveries int `json:"recoveries"`
	// Workspaces is the witness chain's verdict (workspaces.go).
	Workspaces WorkspaceStats `json:"workspaces"`
}

// settle waits, up to timeout, until none of the sessions has a queued
// input or a running turn (read linearizably, through every node in
// turn), and returns those that still have.
func settle(ctx context.Context, clients map[string]*nodeClient, nodes, ids []string, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	pending := slices.Clone(ids)
	for i := 0; ; i++ {
		pending = slices.DeleteFunc(pending, func(id string) bool {
			c := clients[nodes[i%len(nodes)]]
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			d, err := c.session.DescribeSession(cctx, connect.NewRequest(&fakv1.DescribeSessionRequest{
				SessionId: id, Consistency: fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE}))
			if err != nil {
				return false
			}
			p := d.Msg.GetSession().GetPending()
			return len(p.GetQueuedInputs()) == 0 && p.GetTurnInputSeq() == 0
		})
		if len(pending) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return pending
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

// turnJournals reads the sessions' whole journals for checker.Turns.
func turnJournals(ctx context.Context, clients map[string]*nodeClient, nodes, ids []string) (map[string][]checker.JournalEvent, error) {
	out := make(map[string][]checker.JournalEvent, len(ids))
	for i, id := range ids {
		events, err := readJournal(ctx, clients[nodes[i%len(nodes)]], id)
		if err != nil {
			return nil, err
		}
		evs := make([]checker.JournalEvent, len(events))
		for k, e := range events {
			evs[k] = checker.JournalEvent{Seq: e.Seq, Kind: e.Kind, Text: e.Text, Data: e.Data}
		}
		out[id] = evs
	}
	return out, nil
}

// modelAnswers checks what the model sessions' completed turns say. The
// fake model answers each request with modelReply of the last user message,
// so the output events of a completed turn, put together, must be exactly
// the reply to that turn's own input: not another input's (a context
// rebuilt wrong after a move or a restart), not twice (a stream replayed
// into the journal). Turns closed any other way are not checked (a killed
// node's turn is closed as interrupted with whatever it had streamed).
func modelAnswers(journals map[string][]checker.JournalEvent, ids []string) (checked int, violations []string) {
	for _, id := range ids {
		inputs := map[uint64]string{}
		var open uint64
		var out strings.Builder
		for _, e := range journals[id] {
			var d struct {
				InputSeq uint64 `json:"input_seq"`
				Status   string `json:"status"`
			}
			_ = json.Unmarshal(e.Data, &d)
			switch e.Kind {
			case "input":
				inputs[e.Seq] = e.Text
			case "turn.started":
				open = d.InputSeq
				out.Reset()
			case "output":
				out.WriteString(e.Text)
			case "turn.completed":
				if d.Status == "completed" && open != 0 {
					checked++
					if want := modelReply(inputs[open]); out.String() != want {
						violations = append(violations, fmt.Sprintf("%s #%d: the turn of input #%d said %q; the model answered %q", id, e.Seq, open, out.String(), want))
					}
				}
				open = 0
			}
		}
	}
	return checked, violations
}

// modelMoves counts the sessions' epoch changes after their first epoch,
// and the moves the fleet requested to recover them.
func modelMoves(journals map[string][]checker.JournalEvent, ids []string) (moves, recoveries int) {
	for _, id := range ids {
		epochs := 0
		for _, e := range journals[id] {
			switch e.Kind {
			case "epoch.changed":
				if epochs++; epochs > 1 {
					moves++
				}
			case "move.requested":
				var d struct {
					Cause string `json:"cause"`
				}
				if json.Unmarshal(e.Data, &d) == nil && d.Cause == "recovery" {
					recoveries++
				}
			}
		}
	}
	return moves, recoveries
}
