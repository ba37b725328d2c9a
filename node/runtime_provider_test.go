package node_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/gateway"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/runner/model/modeltest"
	"github.com/fak-dev/fak/node/testcluster"
)

// The provider CLIs as session runtimes on a three-node fleet, each run by
// the fake executable of node/runner/provider/testdata/bin (first on PATH,
// as a real install would be): the first turn binds the provider's thread
// on the session, a move to another node resumes the same thread there
// from the transcript the workspace carried (Claude's under the new
// path's project key),
// and a fresh rotates it (the next turn starts a new one). Codex decides
// approvals by its sandbox: the capability set does not offer them.
func TestProviderRuntimes(t *testing.T) {
	bin, err := filepath.Abs(filepath.Join("runner", "provider", "testdata", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	off := false
	c := moveFleet(t, testcluster.Options{Configure: func(name string, cfg *node.Config) {
		cfg.Runtimes = append(cfg.Runtimes,
			// --fake-transcripts: the fakes keep each thread's transcript
			// where the real CLI does, and resume only one they find: the
			// transcript must move with the workspace.
			node.RuntimeConfig{Name: "claude", Adapter: node.AdapterClaude, Policy: "acceptEdits", Gateway: &off,
				Command: []string{"claude", "--fake-transcripts"}},
			node.RuntimeConfig{Name: "codex", Adapter: node.AdapterCodex, Policy: "workspace-write", Gateway: &off,
				Command: []string{"codex", "--fake-transcripts"}},
			node.RuntimeConfig{Name: "gemini", Adapter: node.AdapterGemini, Gateway: &off,
				Command: []string{"gemini", "--fake-transcripts"}},
		)
	}})
	n1 := c.Node("n1")
	for _, rt := range []string{"claude", "codex", "gemini"} {
		t.Run(rt, func(t *testing.T) {
			id := createPlaced(t, c, n1, rt, "n2")
			att := talk(t, c, n1, id)
			turn := func(epoch uint64, text string) string {
				t.Helper()
				in := actAt(t, c, n1, id, att, epoch, text)
				f, evs := completedTurn(t, c, n1, id, in)
				if f["status"] != "completed" {
					t.Fatalf("turn of %q: %v\n%s", text, f, transcript(evs))
				}
				return transcript(evs)
			}
			first := turn(1, "hello")
			s := describe(t, c, n1, id)
			thread := s.GetProviderSessionId()
			if s.GetProvider() != rt || !s.GetProviderThread() || thread == "" || !strings.Contains(first, "new "+thread) {
				t.Fatalf("after the first turn: provider %q thread %q (held %v); the turn:\n%s", s.GetProvider(), thread, s.GetProviderThread(), first)
			}

			mv := moveSession(t, c, n1, id, "n3", 10*time.Second)
			if m := waitMove(t, c, id, mv.MoveId, "ended", moveEnded); m.State != fsm.MoveCutoverCommitted {
				t.Fatalf("move %+v", m)
			}
			s = describe(t, c, n1, id)
			if out := turn(s.GetEpoch(), "after the move"); !strings.Contains(out, "resumed "+thread+": after the move") {
				t.Fatalf("the turn on n3 did not resume thread %s:\n%s\njournal:\n%s", thread, out,
					transcript(readAll(t, c, n1, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)))
			}

			if _, err := c.Sessions(n1).FreshSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.FreshSessionRequest{SessionId: id})); err != nil {
				t.Fatal(err)
			}
			s = describe(t, c, n1, id)
			if s.GetProviderThread() {
				t.Fatalf("fresh left thread %s held", s.GetProviderSessionId())
			}
			out := turn(s.GetEpoch(), "after the fresh")
			s = describe(t, c, n1, id)
			// A new thread, given the conversation so far from the journal.
			if !strings.Contains(out, "new "+s.GetProviderSessionId()+": Conversation so far") ||
				!strings.Contains(out, "user: after the move") || !s.GetProviderThread() {
				t.Fatalf("after the fresh the turn must start a new thread and bind it (now %q):\n%s\njournal:\n%s", s.GetProviderSessionId(), out,
					transcript(readAll(t, c, n1, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)))
			}
			// The journal tells the binding each time it changed.
			bound := 0
			for _, ev := range readAll(t, c, n1, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE) {
				if ev.Kind == fsm.KindProviderBound {
					bound++
				}
			}
			if bound != 2 {
				t.Fatalf("%d provider.bound events, want 2 (the first thread, the one after the fresh)", bound)
			}

			d, err := c.Sessions(n1).DescribeSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id, AttachmentId: att}))
			if err != nil {
				t.Fatal(err)
			}
			for _, ctl := range d.Msg.GetCapabilities().GetControls() {
				if ctl.GetName() != fsm.ControlApprovalAnswer {
					continue
				}
				// Every runtime here decides: claude by its permission mode
				// acceptEdits (with policy "ask" it would ask fak).
				if ctl.GetAvailable() || ctl.GetReason() != string(fsm.ReasonRuntimeDecides) {
					t.Fatalf("%s: approval.answer %+v, want RUNTIME_DECIDES", rt, ctl)
				}
			}
		})
	}
}

// fak's own model runtime through its node's gateway (gateway = true): the
// gateway charges each model call — a query, its tokens, its spend by the
// node's price table — and the runtime only its tool calls; the turn's
// own charge is the turn without a query, so nothing counts twice.
func TestModelRuntimeThroughTheGateway(t *testing.T) {
	srv := modeltest.NewServer()
	t.Cleanup(srv.Close)
	on := true
	c := moveFleet(t, testcluster.Options{Configure: func(name string, cfg *node.Config) {
		cfg.Accounts = append(cfg.Accounts, node.AccountConfig{Name: "local", Provider: "openai", Upstream: srv.URL, PassThrough: true})
		cfg.Prices = []node.PriceConfig{{Model: "fake-*", Price: gateway.Price{InputPerMTok: 2, OutputPerMTok: 8}}}
		cfg.Runtimes = append(cfg.Runtimes, node.RuntimeConfig{Name: "gpt-gw", Adapter: node.AdapterModel, Model: "fake-4",
			AccountRef: "local", Gateway: &on, Tools: []string{"list_files"}, Approve: []string{"list_files"}})
	}})
	n1 := c.Node("n1")
	id := createPlaced(t, c, n1, "gpt-gw", "n2")
	att := talk(t, c, n1, id)
	srv.Script(
		modeltest.Reply{Text: "Let me look.", ToolCalls: []modeltest.ToolCall{{ID: "call_1", Name: "list_files", Arguments: `{"path":"."}`}},
			Usage: &modeltest.Usage{PromptTokens: 100, CompletionTokens: 10}},
		modeltest.Reply{Text: "Nothing there.", Usage: &modeltest.Usage{PromptTokens: 150, CompletionTokens: 20}},
	)
	in := actAt(t, c, n1, id, att, 1, "what is in the workspace?")
	if f, evs := completedTurn(t, c, n1, id, in); f["status"] != "completed" {
		t.Fatalf("turn %v:\n%s", f, transcript(evs))
	}
	for _, r := range srv.Requests() {
		if r.Header.Get("X-Trace-Id") != "" || r.Header.Get("Authorization") != "" {
			t.Fatalf("the upstream saw fak's headers or the runtime key: %v", r.Header)
		}
	}
	var used *fakv1.Budget
	c.WaitFor(30*time.Second, "the gateway's charges", func() bool {
		used = envelopeOf(t, c, n1, id).GetUsed()
		return used.GetQueries() >= 2
	})
	// Two calls: 250 prompt and 30 output tokens, 250×2 + 30×8 micros.
	if used.GetTurns() != 1 || used.GetQueries() != 2 || used.GetInputTokens() != 250 || used.GetOutputTokens() != 30 ||
		used.GetSpendMicros() != 740 || used.GetToolCalls() != 1 {
		t.Fatalf("envelope used %v: want 1 turn, 2 queries, 250 input and 30 output tokens, 740 µ spend, 1 tool call", used)
	}
}
