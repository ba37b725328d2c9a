package node_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/runner/runnertest"
	"github.com/fak-dev/fak/node/testcluster"
)

// repoFile is a file of this repository, absolute.
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", rel))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// createPlaced creates a session on the given runtime and node.
func createPlaced(t *testing.T, c *testcluster.Cluster, via *testcluster.Node, runtime, on string) string {
	t.Helper()
	resp, err := c.Sessions(via).CreateSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.CreateSessionRequest{
		Title: runtime, Placement: &fakv1.Placement{RuntimeAdapter: runtime, Node: on},
	}))
	if err != nil {
		t.Fatalf("create a %s session on %s: %v", runtime, on, err)
	}
	return resp.Msg.Session.SessionId
}

// completedTurn waits for the turn of input seq to complete and returns its
// turn.completed fact and the events of the turn.
func completedTurn(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id string, input uint64) (map[string]any, []*fakv1.Event) {
	t.Helper()
	var done *fakv1.Event
	evs := waitJournal(t, c, n, id, fmt.Sprintf("the turn of input #%d completes", input), func(evs []*fakv1.Event) bool {
		for _, ev := range after(evs, input) {
			if ev.Kind == "turn.completed" && num(fact(t, ev)["input_seq"]) == float64(input) {
				done = ev
				return true
			}
		}
		return false
	})
	// The turn: from its turn.started to its turn.completed.
	var turn []*fakv1.Event
	in := false
	for _, ev := range after(evs, input) {
		if ev.Kind == "turn.started" && num(fact(t, ev)["input_seq"]) == float64(input) {
			in = true
		}
		if in {
			turn = append(turn, ev)
		}
		if ev == done {
			break
		}
	}
	return fact(t, done), turn
}

// Real programs as session agents on a three-node fleet: a text agent, the
// Python example speaking protocol v1 with an approval answered by a
// second client on another node, a failing agent, and a move between
// turns.
func TestExecRuntimes(t *testing.T) {
	runnertest.NeedTool(t, "python3", "python3")
	runnertest.NeedTool(t, "bwrap", "bubblewrap")
	// The nodes' token file, which a sandboxed runtime must not read, and a
	// place outside every workspace; not under /tmp, which the sandbox
	// replaces anyway.
	sec := runnertest.NewSecrets(t)
	tokenFile := sec.Tokens
	if err := os.WriteFile(tokenFile, []byte("operator "+testcluster.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(sec.Outside, "escaped")
	probe := fmt.Sprintf(`cat %s; ls "$FAK_WORKSPACE/../.."; echo escaped > %s; echo inside > inside.txt; echo probe done`, tokenFile, outside)
	c := moveFleet(t, testcluster.Options{Configure: func(name string, cfg *node.Config) {
		cfg.TokenFile = tokenFile
		cfg.Runtimes = append(cfg.Runtimes, node.RuntimeConfig{Name: "boxed", Adapter: node.AdapterExec, Protocol: "text",
			Sandbox: "bwrap", Command: []string{"sh", "-c", probe}})
		cfg.Runtimes = append(cfg.Runtimes,
			node.RuntimeConfig{Name: "shout", Adapter: node.AdapterExec, Protocol: "text",
				Command: []string{repoFile(t, "examples/agents/shout.sh")}},
			node.RuntimeConfig{Name: "py", Adapter: node.AdapterExec, Protocol: "jsonl",
				Command: []string{"python3", repoFile(t, "examples/agents/echo_agent.py")}},
			node.RuntimeConfig{Name: "fails", Adapter: node.AdapterExec, Protocol: "text",
				Command: []string{"sh", "-c", "echo partial; echo 'it broke' >&2; exit 3"}},
			node.RuntimeConfig{Name: "forker", Adapter: node.AdapterExec, Protocol: "text",
				Command: []string{repoFile(t, "node/runner/exec/testdata/forker.sh"), "started"}},
			node.RuntimeConfig{Name: "slow", Adapter: node.AdapterExec, Protocol: "text", TurnTimeout: time.Second,
				Command: []string{repoFile(t, "node/runner/exec/testdata/forker.sh"), "started"}},
			node.RuntimeConfig{Name: "garbled", Adapter: node.AdapterExec, Protocol: "jsonl",
				Command: []string{"sh", "-c", `read -r turn; echo '{"type":"output","text":"fine"}'; echo 'this is not json'; sleep 300`}},
		)
	}})
	n1, n2, n3 := c.Node("n1"), c.Node("n2"), c.Node("n3")

	t.Run("text", func(t *testing.T) {
		id := createPlaced(t, c, n1, "shout", "n2")
		att := attach(t, c, n1, id, "terminal", "alice")
		if err := takeLease(ctxT(t, 15*time.Second), c, n1, id, att, false); err != nil {
			t.Fatal(err)
		}
		in := mustAct(t, c, n1, id, att, "hello world\nsecond line")
		f, turn := completedTurn(t, c, n3, id, in)
		if f["status"] != "completed" {
			t.Fatalf("turn %v", f)
		}
		if got := transcript(turn); !strings.Contains(got, "output:HELLO WORLD\nSECOND LINE\n") || !strings.Contains(got, "turn.started:shout on n2") {
			t.Fatalf("transcript:\n%s", got)
		}
	})

	t.Run("jsonl approval from another client", func(t *testing.T) {
		id := createPlaced(t, c, n1, "py", "n2")
		att := attach(t, c, n1, id, "terminal", "alice")
		phone := attach(t, c, n3, id, "browser", "phone")
		if err := takeLease(ctxT(t, 15*time.Second), c, n1, id, att, false); err != nil {
			t.Fatal(err)
		}
		in := mustAct(t, c, n1, id, att, "!run echo made-by-agent > made.txt")
		approve(t, c, n3, id, phone, pendingApproval(t, c, n3, id, in))
		f, turn := completedTurn(t, c, n1, id, in)
		if f["status"] != "completed" || count(turn, "tool.call") != 1 || count(turn, "tool.result") != 1 {
			t.Fatalf("turn %v:\n%s", f, transcript(turn))
		}
		made, err := os.ReadFile(filepath.Join(n2.DataDir, "workspaces", id, "made.txt"))
		if err != nil || strings.TrimSpace(string(made)) != "made-by-agent" {
			t.Fatalf("the tool did not run in the session's workspace on n2: %q %v", made, err)
		}

		// Moved between turns, the next turn runs on n3 with the
		// journal's context.
		mv := moveSession(t, c, n1, id, "n3", 10*time.Second)
		m := waitMove(t, c, id, mv.MoveId, "ended", moveEnded)
		if m.State != fsm.MoveCutoverCommitted {
			t.Fatalf("move %+v", m)
		}
		in2 := actAt(t, c, n1, id, att, 2, "after the move")
		f, turn = completedTurn(t, c, n1, id, in2)
		if f["status"] != "completed" || !strings.Contains(transcript(turn), "turn.started:py on n3") {
			t.Fatalf("turn after the move %v:\n%s", f, transcript(turn))
		}
	})

	t.Run("failing agent", func(t *testing.T) {
		id := createPlaced(t, c, n1, "fails", "n3")
		att := attach(t, c, n2, id, "terminal", "alice")
		if err := takeLease(ctxT(t, 15*time.Second), c, n2, id, att, false); err != nil {
			t.Fatal(err)
		}
		in := mustAct(t, c, n2, id, att, "go")
		f, turn := completedTurn(t, c, n1, id, in)
		if f["status"] != "failed" || f["reason"] != "EXIT_STATUS" || !strings.Contains(f["error"].(string), "it broke") {
			t.Fatalf("turn %v", f)
		}
		if !strings.Contains(transcript(turn), "output:partial") {
			t.Fatalf("output before the failure is kept:\n%s", transcript(turn))
		}
	})

	// A sandboxed runtime sees neither the token file nor the node's data
	// dir, and writes nowhere but its workspace.
	t.Run("sandbox", func(t *testing.T) {
		id := createPlaced(t, c, n1, "boxed", "n2")
		att := talk(t, c, n1, id)
		in := actAt(t, c, n1, id, att, 1, "probe")
		_, turn := completedTurn(t, c, n1, id, in)
		out := transcript(turn)
		if !strings.Contains(out, "probe done") || strings.Contains(out, testcluster.Token) || strings.Contains(out, "fsm.db") {
			t.Fatalf("sandboxed agent's output:\n%s", out)
		}
		if _, err := os.Stat(outside); err == nil {
			t.Fatal("a sandboxed agent wrote outside its workspace")
		}
		if b, err := os.ReadFile(filepath.Join(n2.DataDir, "workspaces", id, "inside.txt")); err != nil || string(b) != "inside\n" {
			t.Fatalf("the workspace is writable inside the sandbox: %q %v", b, err)
		}
	})

	// Interrupt: the turn closes as interrupted by the client, and no
	// process of the agent's group survives (pids the agent recorded).
	t.Run("interrupt kills the process group", func(t *testing.T) {
		id := createPlaced(t, c, n1, "forker", "n3")
		att := talk(t, c, n1, id)
		in := actAt(t, c, n1, id, att, 1, "go")
		waitJournal(t, c, n1, id, "the agent started", func(evs []*fakv1.Event) bool { return count(after(evs, in), "output") > 0 })
		pids := agentPids(t, filepath.Join(n3.DataDir, "workspaces", id, "pids"))
		if _, err := c.Sessions(n1).Act(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.ActRequest{SessionId: id, AttachmentId: att,
			ExpectedEpoch: 1, Action: &fakv1.ActRequest_Interrupt{Interrupt: &fakv1.InterruptTurn{}}})); err != nil {
			t.Fatal(err)
		}
		f, _ := completedTurn(t, c, n1, id, in)
		if f["status"] != "interrupted" {
			t.Fatalf("turn %v", f)
		}
		waitGone(t, c, pids)
		// The session goes on: the next input gets a turn of its own.
		next := actAt(t, c, n1, id, att, 1, "again")
		waitJournal(t, c, n1, id, "the next turn runs", func(evs []*fakv1.Event) bool { return count(after(evs, next), "output") > 0 })
	})

	t.Run("turn_timeout", func(t *testing.T) {
		id := createPlaced(t, c, n1, "slow", "n2")
		att := talk(t, c, n1, id)
		in := actAt(t, c, n1, id, att, 1, "go")
		f, _ := completedTurn(t, c, n1, id, in)
		if f["status"] != "failed" || f["reason"] != "TURN_TIMEOUT" {
			t.Fatalf("turn %v", f)
		}
		waitGone(t, c, agentPids(t, filepath.Join(n2.DataDir, "workspaces", id, "pids")))
	})

	t.Run("malformed jsonl", func(t *testing.T) {
		id := createPlaced(t, c, n1, "garbled", "n2")
		att := talk(t, c, n1, id)
		in := actAt(t, c, n1, id, att, 1, "go")
		f, _ := completedTurn(t, c, n1, id, in)
		if f["status"] != "failed" || f["reason"] != "RUNTIME_PROTOCOL" || !strings.Contains(f["error"].(string), "line 2") {
			t.Fatalf("turn %v", f)
		}
	})
}

// agentPids reads the pids forker.sh recorded in its workspace.
func agentPids(t *testing.T, path string) []int {
	t.Helper()
	var pids []int
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil {
			for _, f := range strings.Fields(string(b)) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("pids file %q", b)
				}
				pids = append(pids, pid)
			}
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent never wrote %s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitGone waits until none of pids runs (gone, or a zombie awaiting its
// reaper).
func waitGone(t *testing.T, c *testcluster.Cluster, pids []int) {
	t.Helper()
	c.WaitFor(15*time.Second, fmt.Sprintf("the agent's processes %v to be gone", pids), func() bool {
		for _, pid := range pids {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err == nil && !strings.Contains(string(b), ") Z ") {
				return false
			}
		}
		return true
	})
}
