package node_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/node/testcluster"
)

// Interrupts and external sessions on a real fleet (DESIGN.md §6, §7):
// the lease holder interrupts a long echo turn through Act and the next
// input is answered; a move with interrupt does not wait for the turn in
// flight; a session bound by a guarded launch refuses input and no runner
// ever answers it.

// interruptTurn is an echo turn long enough that nothing here waits for
// one to end by itself; a long input streams it in 8 chunks, so a runner
// learns of an interrupt within an eighth of it.
const interruptTurn = 4 * time.Second

// longInput is an input of many words: its echo streams in the most chunks.
var longInput = strings.TrimSpace(strings.Repeat("word ", 40))

func interruptAct(c *testcluster.Cluster, n *testcluster.Node, id, att string, epoch uint64) (*fakv1.ActResponse, error) {
	resp, err := c.Sessions(n).Act(c.Context(15*time.Second), connect.NewRequest(&fakv1.ActRequest{
		SessionId: id, AttachmentId: att, ExpectedEpoch: epoch,
		Action: &fakv1.ActRequest_Interrupt{Interrupt: &fakv1.InterruptTurn{}},
	}))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// turnRunning waits until the session runs the turn of input in.
func turnRunning(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id string, in uint64) {
	t.Helper()
	c.WaitFor(20*time.Second, "the turn of input #"+itoa(in), func() bool {
		return describe(t, c, n, id).GetPending().GetTurnInputSeq() == in
	})
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

func TestInterrupt_ActClosesTheTurnAndTheNextInputIsAnswered(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 3, EchoTurn: interruptTurn, LogLevel: "off"})
	leader := c.WaitForLeader(10 * time.Second)
	n := c.Followers()[0] // a follower: Act is forwarded to the leader
	id := createSession(t, c, leader, "interrupt")
	me := attach(t, c, n, id, "terminal", "alice")
	if err := takeLease(ctxT(t, 15*time.Second), c, n, id, me, false); err != nil {
		t.Fatal(err)
	}
	in := mustAct(t, c, n, id, me, longInput)
	turnRunning(t, c, n, id, in)

	// Another attachment cannot; the holder can.
	bob := attach(t, c, n, id, "browser", "bob")
	if _, err := interruptAct(c, n, id, bob, 1); reasonOf(err) != "LEASE_NOT_HELD" {
		t.Fatalf("interrupt by a non-holder: %v, want LEASE_NOT_HELD", err)
	}
	resp, err := interruptAct(c, n, id, me, 1)
	if err != nil {
		t.Fatalf("interrupt: %v", err)
	}
	evs := readAll(t, c, n, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)
	done := evs[resp.GetSeq()-1]
	f := fact(t, done)
	by, _ := f["by"].(map[string]any)
	if done.Kind != "turn.completed" || f["status"] != "interrupted" || f["input_seq"] != float64(in) ||
		by["attachment_id"] != me || by["client_kind"] != "terminal" || by["client_name"] != "alice" || done.Text != "interrupted by terminal alice" {
		t.Fatalf("the interrupt's event: #%d %s %q %s", done.Seq, done.Kind, done.Text, done.Data)
	}
	if _, err := interruptAct(c, n, id, me, 1); reasonOf(err) != "NO_TURN_RUNNING" {
		t.Fatalf("a second interrupt: %v, want NO_TURN_RUNNING", err)
	}

	// The session goes on: the next input is answered, and the runner of
	// the interrupted turn wrote nothing more for it.
	next := mustAct(t, c, n, id, me, "next")
	evs = waitJournal(t, c, n, id, "the next input's turn to complete", func(evs []*fakv1.Event) bool {
		for _, ev := range after(evs, next) {
			if ev.Kind == "turn.completed" && fact(t, ev)["input_seq"] == float64(next) && fact(t, ev)["status"] == "completed" {
				return true
			}
		}
		return false
	})
	if !strings.Contains(transcript(after(evs, next)), "echo: next") {
		t.Fatalf("the next input was not answered:\n%s", transcript(after(evs, next)))
	}
	for _, ev := range after(evs, resp.GetSeq()) {
		if ev.Kind == "turn.completed" && fact(t, ev)["input_seq"] == float64(in) {
			t.Fatalf("the interrupted turn was completed twice: #%d %s", ev.Seq, ev.Data)
		}
		if ev.Kind == "output" && ev.Seq < next {
			t.Fatalf("output for the interrupted turn after the interrupt: #%d %q", ev.Seq, ev.Text)
		}
	}
}

func TestInterrupt_MoveInducesTheSafePoint(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 3, EchoTurn: 30 * time.Second, LogLevel: "off"})
	leader := c.WaitForLeader(10 * time.Second)
	n1 := c.Nodes[0]
	id := createSession(t, c, n1, "moving") // placed on n1, which received it
	me := attach(t, c, n1, id, "terminal", "alice")
	if err := takeLease(ctxT(t, 15*time.Second), c, n1, id, me, false); err != nil {
		t.Fatal(err)
	}
	in := mustAct(t, c, n1, id, me, longInput)
	turnRunning(t, c, n1, id, in)
	waitNodeRecords(t, c)

	start := time.Now()
	resp, err := c.Sessions(leader).MoveSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.MoveSessionRequest{
		SessionId: id, ToNode: "n2", Interrupt: true, SafePointTimeoutMs: 10_000,
	}))
	if err != nil {
		t.Fatalf("move --interrupt: %v", err)
	}
	moveID := resp.Msg.GetMove().GetMoveId()
	c.WaitFor(20*time.Second, "the cutover", func() bool {
		m, err := c.Sessions(n1).GetMove(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.GetMoveRequest{SessionId: id}))
		if err != nil || m.Msg.GetMove().GetMoveId() != moveID {
			return false
		}
		if s := m.Msg.GetMove().GetState(); s == "MOVE_FAILED" || s == "MOVE_UNSAFE" {
			t.Fatalf("the move ended %s: %s", s, m.Msg.GetMove().GetReason())
		}
		return m.Msg.GetMove().GetState() == "CUTOVER_COMMITTED"
	})
	if e := time.Since(start); e > 10*time.Second {
		t.Fatalf("the move took %s: it waited for the 30 s turn", e)
	}
	evs := readAll(t, c, n1, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)
	var closed bool
	for _, ev := range after(evs, in) {
		if ev.Kind == "turn.completed" {
			f := fact(t, ev)
			by, _ := f["by"].(map[string]any)
			closed = f["status"] == "interrupted" && f["input_seq"] == float64(in) && by["move"] == moveID
			break
		}
	}
	if !closed {
		t.Fatalf("the turn in flight was not closed as interrupted by %s:\n%s", moveID, transcript(after(evs, in)))
	}
	if s := describe(t, c, n1, id); s.GetPlacement().GetNode() != "n2" || s.GetEpoch() != 2 {
		t.Fatalf("after the move: placement %v epoch %d", s.GetPlacement(), s.GetEpoch())
	}
}

func TestExternal_GuardedSessionRefusesInputAndNoRunnerAnswers(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 3, EchoTurn: 50 * time.Millisecond, LogLevel: "off"})
	leader := c.WaitForLeader(10 * time.Second)
	waitNodeRecords(t, c) // a move names a node with a record, or is NOT_FOUND first
	n := c.Followers()[0]
	lc := fakv1connect.NewLifecycleServiceClient(c.HTTPClient(), c.BaseURL(n), connect.WithInterceptors(apiclient.Bearer(testcluster.Token)))

	// A new launch session, as fak guard binds it.
	bound, err := lc.BindLaunch(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.BindLaunchRequest{
		LaunchId: "lnc_test1", Provider: "claude", Title: "claude in /w", Host: "laptop-7"}))
	if err != nil {
		t.Fatal(err)
	}
	id := bound.Msg.GetSession().GetSessionId()
	if p := bound.Msg.GetSession().GetPlacement(); p.GetRuntimeAdapter() != "external" || p.GetLaunchId() != "lnc_test1" ||
		p.GetHost() != "laptop-7" || p.GetNode() != "" || p.GetProvider() != "claude" {
		t.Fatalf("placement %v, want external claude on laptop-7", p)
	}
	// A session the fleet ran, bound with --session: external from then on.
	other := createSession(t, c, leader, "was echo")
	if _, err := lc.BindLaunch(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.BindLaunchRequest{
		LaunchId: "lnc_test2", Provider: "codex", SessionId: other, Host: "laptop-7"})); err != nil {
		t.Fatal(err)
	}
	if p := describe(t, c, n, other).GetPlacement(); p.GetRuntimeAdapter() != "external" || p.GetLaunchId() != "lnc_test2" {
		t.Fatalf("bound session placement %v", p)
	}

	for _, sid := range []string{id, other} {
		me := attach(t, c, n, sid, "browser", "bob")
		if err := takeLease(ctxT(t, 15*time.Second), c, n, sid, me, false); err != nil {
			t.Fatal(err)
		}
		before := describe(t, c, n, sid)
		_, err := act(ctxT(t, 15*time.Second), c, n, sid, me, before.GetEpoch(), "hello?")
		if reasonOf(err) != "EXTERNAL_RUNTIME" || !strings.Contains(err.Error(), "on host laptop-7") {
			t.Fatalf("%s: input: %v, want EXTERNAL_RUNTIME naming the host", sid, err)
		}
		if _, err := interruptAct(c, n, sid, me, before.GetEpoch()); reasonOf(err) != "EXTERNAL_RUNTIME" {
			t.Fatalf("%s: interrupt: %v, want EXTERNAL_RUNTIME", sid, err)
		}
		_, err = c.Sessions(n).MoveSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.MoveSessionRequest{SessionId: sid, ToNode: "n3"}))
		if reasonOf(err) != "EXTERNAL_RUNTIME" {
			t.Fatalf("%s: move: %v, want EXTERNAL_RUNTIME", sid, err)
		}
		if after := describe(t, c, n, sid); after.GetHeadSeq() != before.GetHeadSeq() {
			t.Fatalf("%s: the refusals appended: head %d → %d", sid, before.GetHeadSeq(), after.GetHeadSeq())
		}
	}
	// No runner ever writes into them (the echo turn is 50 ms: give every
	// runner many turns' time to misbehave).
	time.Sleep(time.Second)
	for _, sid := range []string{id, other} {
		for _, ev := range readAll(t, c, n, sid, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE) {
			switch ev.Kind {
			case "turn.started", "output", "tool.call", "approval.requested", "tool.result":
				t.Fatalf("%s: a runner answered: #%d %s %q", sid, ev.Seq, ev.Kind, ev.Text)
			}
		}
	}
}
