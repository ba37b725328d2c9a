package node_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/runner/model"
	"github.com/fak-dev/fak/node/runner/model/modeltest"
	"github.com/fak-dev/fak/node/testcluster"
)

// modelRuntime is the runtime block every node of the model tests has.
func modelRuntime(url string) node.RuntimeConfig {
	one := 1
	return node.RuntimeConfig{Name: "gpt", Adapter: node.AdapterModel, Endpoint: url, Model: "fake-4",
		Tools: []string{"write_file", "read_file", "list_files"}, Approve: []string{"list_files"},
		InputPerMTok: 2, OutputPerMTok: 8, MaxRetries: &one}
}

// modelOptions are the adapter options modelRuntime makes, for
// rebuilding a request from a journal.
func modelOptions(url string) model.Options {
	return model.Options{Name: "gpt", Endpoint: url, Model: "fake-4", Tools: []string{"write_file", "read_file", "list_files"}}
}

// toFSM converts API events to the FSM's, as a runtime reads them.
func toFSM(evs []*fakv1.Event) []*fsmpb.Event {
	out := make([]*fsmpb.Event, len(evs))
	for i, e := range evs {
		out[i] = &fsmpb.Event{Seq: e.Seq, Kind: e.Kind, Text: e.Text, Data: e.Data}
	}
	return out
}

// upToStarted cuts a journal at the turn.started of input seq: the
// context a runtime rebuilds for that turn.
func upToStarted(t *testing.T, evs []*fakv1.Event, input uint64) []*fakv1.Event {
	t.Helper()
	for i, e := range evs {
		if e.Kind == "turn.started" && e.Seq > input && uint64(fact(t, e)["input_seq"].(float64)) == input {
			return evs[:i+1]
		}
	}
	t.Fatalf("no turn.started for input #%d", input)
	return nil
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

// lastRequest is the newest request the server saw.
func lastRequest(t *testing.T, srv *modeltest.Server) modeltest.Request {
	t.Helper()
	reqs := srv.Requests()
	if len(reqs) == 0 {
		t.Fatal("the server saw no request")
	}
	return reqs[len(reqs)-1]
}

// fak's own agent loop against an OpenAI-compatible server on a three-node
// fleet: a tool call approved from a second client, a reset, a move in the
// middle of a conversation (the destination sends the bytes the source's
// replica gives), recovery after the node dies mid-turn, the budget, and
// upstream failures.
func TestModelRuntime(t *testing.T) {
	srv := modeltest.NewServer()
	t.Cleanup(srv.Close)
	c := moveFleet(t, testcluster.Options{RecoverAfter: 500 * time.Millisecond, Configure: func(name string, cfg *node.Config) {
		cfg.Runtimes = append(cfg.Runtimes, modelRuntime(srv.URL))
	}})
	n1, n2, n3 := c.Node("n1"), c.Node("n2"), c.Node("n3")

	// One conversation across a tool call, a move and a reset.
	id := createPlaced(t, c, n1, "gpt", "n2")
	att := talk(t, c, n1, id)
	phone := attach(t, c, n3, id, "browser", "phone")

	srv.Script(
		modeltest.Reply{Text: "I will write it down.", ToolCalls: []modeltest.ToolCall{{ID: "call_1", Name: "write_file", Arguments: `{"path":"notes.txt","content":"remember the milk"}`}}},
		modeltest.Reply{Text: "Done: notes.txt holds it."},
	)
	in := actAt(t, c, n1, id, att, 1, "note that I need milk")
	approve(t, c, n3, id, phone, pendingApproval(t, c, n3, id, in))
	f, turn := completedTurn(t, c, n1, id, in)
	if f["status"] != "completed" || count(turn, "tool.call") != 1 || count(turn, "tool.result") != 1 {
		t.Fatalf("tool turn %v:\n%s", f, transcript(turn))
	}
	if b, err := os.ReadFile(filepath.Join(n2.DataDir, "workspaces", id, "notes.txt")); err != nil || string(b) != "remember the milk" {
		t.Fatalf("write_file in the workspace on n2: %q %v", b, err)
	}
	msgs := lastRequest(t, srv).Messages()
	if last := msgs[len(msgs)-1]; last.Role != "tool" {
		t.Fatalf("the second call feeds the tool result back; last message %+v", last)
	}
	// The model's usage is charged: tokens and spend from the usage chunks,
	// the tool call that ran.
	var spend, tools float64
	for _, ev := range readAll(t, c, n1, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE) {
		if ev.Kind == "budget.charged" {
			f := fact(t, ev)
			if u, ok := f["usage"].(map[string]any); ok {
				spend += num(u["spend_micros"])
				tools += num(u["tool_calls"])
			}
		}
	}
	if spend == 0 || tools != 1 {
		t.Fatalf("usage not charged: spend %v µ, tool calls %v", spend, tools)
	}

	t.Run("move mid-conversation sends the same bytes", func(t *testing.T) {
		mv := moveSession(t, c, n1, id, "n3", 10*time.Second)
		if m := waitMove(t, c, id, mv.MoveId, "ended", moveEnded); m.State != fsm.MoveCutoverCommitted {
			t.Fatalf("move %+v", m)
		}
		before := len(srv.Requests())
		next := actAt(t, c, n1, id, att, 2, "what did I ask you to note?")
		if f, _ := completedTurn(t, c, n1, id, next); f["status"] != "completed" {
			t.Fatalf("turn after the move: %v", f)
		}
		reqs := srv.Requests()
		if len(reqs) != before+1 {
			t.Fatalf("%d requests for one plain turn", len(reqs)-before)
		}
		// The source n2's replica, read stale: what it would have sent.
		evs := readAll(t, c, n2, id, fakv1.ReadConsistency_READ_CONSISTENCY_STALE)
		want, err := model.RequestBody(modelOptions(srv.URL), "", toFSM(upToStarted(t, evs, next)))
		if err != nil {
			t.Fatal(err)
		}
		if got := reqs[before].Body; !bytes.Equal(got, want) {
			t.Fatalf("the destination's request differs from the source replica's:\n got %s\nwant %s", got, want)
		}
		if !strings.Contains(string(want), "remember the milk") {
			t.Fatalf("the context lost the tool call: %s", want)
		}
	})

	t.Run("reset: only messages after the boundary", func(t *testing.T) {
		if _, err := c.Sessions(n1).ResetSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.ResetSessionRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
		next := actAt(t, c, n1, id, att, describe(t, c, n1, id).Epoch, "a fresh start")
		completedTurn(t, c, n1, id, next)
		msgs := lastRequest(t, srv).Messages()
		if len(msgs) != 2 || msgs[0].Role != "system" || msgs[1].Role != "user" || !strings.Contains(lastRequest(t, srv).LastUserText(), "a fresh start") {
			t.Fatalf("after a reset the model got %+v", msgs)
		}
	})

	t.Run("upstream failures", func(t *testing.T) {
		sid := createPlaced(t, c, n2, "gpt", "n1")
		a := talk(t, c, n2, sid)
		// 429 with Retry-After: retried after the wait, then answered.
		srv.Script(modeltest.ErrorReply(429, "slow down", "Retry-After", "1"), modeltest.Reply{Text: "after the wait"})
		in := actAt(t, c, n2, sid, a, 1, "hi")
		if f, _ := completedTurn(t, c, n2, sid, in); f["status"] != "completed" {
			t.Fatalf("429 then success: %v", f)
		}
		reqs := srv.Requests()
		if gap := reqs[len(reqs)-1].Received.Sub(reqs[len(reqs)-2].Received); gap < time.Second {
			t.Fatalf("retried %v after a Retry-After of 1s", gap)
		}
		for _, tc := range []struct {
			reply  modeltest.Reply
			reason string
		}{
			{modeltest.Reply{Text: "half a thought and", Fault: modeltest.Malformed, FaultAfter: 2}, "UPSTREAM_PROTOCOL"},
			{modeltest.Reply{Text: "half a thought and", Fault: modeltest.Cut, FaultAfter: 2}, "UPSTREAM_STREAM_CUT"},
			{modeltest.ErrorReply(401, "bad key"), "UPSTREAM_AUTH"},
		} {
			srv.Script(tc.reply)
			in := actAt(t, c, n2, sid, a, 1, "again")
			f, _ := completedTurn(t, c, n2, sid, in)
			if f["status"] != "failed" || f["reason"] != tc.reason {
				t.Fatalf("want failed %s, got %v", tc.reason, f)
			}
		}
	})

	t.Run("budget exhausted before the next model call", func(t *testing.T) {
		resp, err := c.Sessions(n1).CreateSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.CreateSessionRequest{
			Title: "budget", Placement: &fakv1.Placement{RuntimeAdapter: "gpt", Node: "n3"},
			Policy: &fakv1.Policy{Limits: &fakv1.Budget{Queries: 1}},
		}))
		if err != nil {
			t.Fatal(err)
		}
		sid := resp.Msg.Session.SessionId
		a := talk(t, c, n1, sid)
		srv.Script(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{ID: "call_ls", Name: "list_files", Arguments: `{}`}}})
		before := len(srv.Requests())
		in := actAt(t, c, n1, sid, a, 1, "look around")
		f, _ := completedTurn(t, c, n1, sid, in)
		if f["status"] != "failed" || f["reason"] != string(fsm.ReasonBudgetExhausted) {
			t.Fatalf("want failed BUDGET_EXHAUSTED, got %v", f)
		}
		if n := len(srv.Requests()) - before; n != 1 {
			t.Fatalf("%d model calls; the second must be refused before it is sent", n)
		}
	})

	t.Run("recovery after the node dies mid-turn", func(t *testing.T) {
		lost := c.Followers()[0]
		via := c.Leader()
		sid := createPlaced(t, c, via, "gpt", lost.Name)
		a := talk(t, c, via, sid)
		srv.Script(modeltest.Reply{Text: "thinking very slowly", Fault: modeltest.Hang, FaultAfter: 1})
		in := actAt(t, c, via, sid, a, 1, "a long question")
		waitJournal(t, c, via, sid, "the turn streams", func(evs []*fakv1.Event) bool { return count(after(evs, in), "output") > 0 })
		c.Stop(lost)
		c.WaitFor(60*time.Second, "session recovered", func() bool {
			m := getMove(t, c, sid)
			return m != nil && m.Cause == fsm.MoveCauseRecovery && m.State == fsm.MoveCutoverCommitted
		})
		d := describe(t, c, via, sid)
		next := actAt(t, c, via, sid, a, d.Epoch, "are you there?")
		f, _ := completedTurn(t, c, via, sid, next)
		if f["status"] != "completed" {
			t.Fatalf("turn after recovery: %v", f)
		}
		evs := readAll(t, c, via, sid, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)
		if tr := turnOf(t, evs, in); tr[len(tr)-1].Text != "interrupted" {
			t.Fatalf("the turn on the lost node ended %q", tr[len(tr)-1].Text)
		}
		want, err := model.RequestBody(modelOptions(srv.URL), "", toFSM(upToStarted(t, evs, next)))
		if err != nil {
			t.Fatal(err)
		}
		if got := lastRequest(t, srv).Body; !bytes.Equal(got, want) {
			t.Fatalf("after recovery the request is not the journal's:\n got %s\nwant %s", got, want)
		}
		c.Start(lost)
	})
	_ = n3
}
