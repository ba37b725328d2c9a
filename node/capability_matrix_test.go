package node_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/runner/model/modeltest"
	"github.com/fak-dev/fak/node/testcluster"
)

// TestCapabilityMatrix: the capability set tells the truth (DESIGN.md §7).
// For every role (read, agent and operator tokens) × runtime (echo, exec,
// model, external) × a few states of the session, a caller describes the session
// as it sees it and acts on every control: each control advertised
// available succeeds, and each one marked unavailable is refused with
// exactly the advertised reason. Where the fleet's contract answers a call
// with a no-op instead of a refusal — a lease.release by a non-holder, a
// session.stop of a stopped session — the test checks it changed nothing.
// The reasons only the capability set gives (NOT_ATTACHED, ALREADY_HELD,
// NOT_HELD_BY_OTHER) steer a client to the better control and name no
// refusal: the fleet may answer those calls (a no-op, or what the handoff
// does: a steal of a free lease takes it), never with another refusal.
// A control advertised available, or unavailable for one of those
// reasons, is acted on in a session of its own, set up afresh; the
// refusals share one session per role, runtime and state.
func TestCapabilityMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("acts on every control of many sessions; skipped with -short")
	}
	// The echo sessions are placed on a node no runner serves (scriptNode):
	// the test writes their turns itself, as the runner would, so a turn
	// or an approval stays pending as long as it needs.
	srv := modeltest.NewServer()
	t.Cleanup(srv.Close)
	srv.SetDefault(matrixModel)
	c := testcluster.New(t, testcluster.Options{Nodes: 3, LogLevel: "off", Configure: func(name string, cfg *node.Config) {
		cfg.Runtimes = append(cfg.Runtimes,
			node.RuntimeConfig{Name: "exec", Adapter: node.AdapterExec, Protocol: "jsonl",
				Command: []string{repoFile(t, "node/testdata/matrix_agent.sh")}},
			node.RuntimeConfig{Name: "model", Adapter: node.AdapterModel, Endpoint: srv.URL, Model: "fake-4",
				Tools: []string{"write_file"}})
	}})
	leader := c.WaitForLeader(10 * time.Second)
	waitNodeRecords(t, c) // a move names a node with a record, or is NOT_FOUND first
	n := c.Followers()[0]
	tokens := map[string]string{
		"read":     createACLToken(t, c, leader, fakv1.Role_ROLE_READ, "matrix").Secret,
		"agent":    createACLToken(t, c, leader, fakv1.Role_ROLE_AGENT, "matrix").Secret,
		"operator": testcluster.Token,
	}
	for _, tok := range tokens {
		c.WaitFor(aclWait, "the tokens to work on "+n.Name, func() bool { return listSessionsCode(c, n, tok) == 0 })
	}
	m := &matrix{t: t, c: c, n: n, leader: leader}
	covered := map[string]bool{} // "control reason" seen acted on
	for _, role := range []string{"read", "agent", "operator"} {
		for _, runtime := range []string{"echo", "exec", "model", "external"} {
			for _, state := range matrixStates {
				if state.onlyEcho && runtime == "external" || (role == "read") != (state.name == "observer") {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/%s", role, runtime, state.name), func(t *testing.T) {
					m.t = t
					// One session takes every refusal: a refused call
					// changes nothing, so the next control finds the
					// session as it was described. A control that may
					// change the session gets one of its own, as does
					// every control after a judgement failed.
					shared := m.setup(tokens[role], runtime, state)
					for _, control := range matrixControls {
						s := shared
						if s == nil || !refusedWithoutEffect(s.control(control)) {
							s = m.setup(tokens[role], runtime, state)
						}
						c := s.control(control)
						if c == nil {
							t.Fatalf("%s: the capability set has no %s", state.name, control)
						}
						got := s.act(control)
						covered[control+" "+c.GetReason()] = true
						if d := judge(c, got); d != "" {
							t.Errorf("%s %s: %s", state.name, control, d)
							shared = nil
						}
					}
				})
			}
		}
	}
	// What the matrix reached: each control available somewhere, and the
	// refusals of the runtime and the roles.
	for _, want := range []string{"turn.interrupt ", "turn.interrupt NO_TURN_RUNNING", "turn.interrupt EXTERNAL_RUNTIME",
		"input.text EXTERNAL_RUNTIME", "session.move EXTERNAL_RUNTIME", "session.move PERMISSION_DENIED", "input.text PERMISSION_DENIED",
		"input.text LEASE_NOT_HELD", "lease.take LEASE_HELD", "session.reset BUSY", "input.text SESSION_STOPPED",
		"approval.answer NO_PENDING_APPROVAL", "approval.answer SESSION_STOPPED", "session.stop SESSION_STOPPED", "lease.release LEASE_NOT_HELD"} {
		if !covered[want] {
			t.Errorf("the matrix never acted on %q", want)
		}
	}
	for _, control := range matrixControls {
		if !covered[control+" "] {
			t.Errorf("the matrix never found %s available", control)
		}
	}
}

// matrixModel is the matrix's model: "a long job" streams a word and then
// hangs until interrupted, "approve me" calls a tool (which waits for an
// approval) and ends once the result is back, anything else is answered.
func matrixModel(r modeltest.Request) modeltest.Reply {
	msgs := r.Messages()
	switch {
	case len(msgs) > 0 && msgs[len(msgs)-1].Role == "tool":
		return modeltest.Reply{Text: "done"}
	case strings.Contains(r.LastUserText(), "a long job"):
		return modeltest.Reply{Text: "working on it", Fault: modeltest.Hang, FaultAfter: 1}
	case strings.Contains(r.LastUserText(), "approve me"):
		return modeltest.Reply{ToolCalls: []modeltest.ToolCall{{ID: "call_1", Name: "write_file", Arguments: `{"path":"x","content":"y"}`}}}
	}
	return modeltest.Echo(r)
}

// scriptNode places the matrix's echo sessions where no runner serves
// them: no node has that name.
const scriptNode = "script"

// matrixControls are the controls of capability set version 4.
var matrixControls = []string{"input.text", "turn.interrupt", "lease.take", "lease.release", "lease.steal", "approval.answer",
	"session.stop", "session.fresh", "session.reset", "session.clear", "session.new", "session.fork", "session.move", "detach"}

// matrixState is how a session is set up before the caller describes it.
type matrixState struct {
	name string
	// attach: the caller attaches (a read token cannot); hold: it takes
	// the input lease; other: another client holds the lease; turn: a
	// turn is running; approval: a turn waits for an approval; stop: the
	// session is stopped.
	attach, hold, other, turn, approval, stop bool
	onlyEcho                                  bool // an external session runs no turn
}

var matrixStates = []matrixState{
	{name: "observer"},
	{name: "holder, turn running", attach: true, hold: true, turn: true, onlyEcho: true},
	{name: "holder, approval pending", attach: true, hold: true, approval: true, onlyEcho: true},
	{name: "holder, idle", attach: true, hold: true},
	{name: "attached, lease free", attach: true},
	{name: "another client holds the lease", attach: true, other: true},
	{name: "stopped", attach: true, hold: true, stop: true},
}

type matrix struct {
	t         *testing.T
	c         *testcluster.Cluster
	n, leader *testcluster.Node
	launches  int
}

// matrixSession is one session set up in a state, and the caller's view.
type matrixSession struct {
	m          *matrix
	id, att    string
	as         fakv1connect.SessionServiceClient // the caller's token
	desc       *fakv1.DescribeSessionResponse
	approvalAt uint64 // the seq an approval answer names
}

func (m *matrix) ctx() context.Context { return m.c.Context(15 * time.Second) }

// setup makes a session on runtime in state, and describes it as the
// caller with token sees it.
func (m *matrix) setup(token, runtime string, st matrixState) *matrixSession {
	t, c, n := m.t, m.c, m.n
	t.Helper()
	op := c.Sessions(n)
	var id string
	if runtime == "external" {
		m.launches++
		lc := fakv1connect.NewLifecycleServiceClient(c.HTTPClient(), c.BaseURL(n), connect.WithInterceptors(apiclient.Bearer(testcluster.Token)))
		r, err := lc.BindLaunch(m.ctx(), connect.NewRequest(&fakv1.BindLaunchRequest{
			LaunchId: fmt.Sprintf("lnc_matrix%d", m.launches), Provider: "claude", Host: "laptop-7", Title: "matrix"}))
		if err != nil {
			t.Fatal(err)
		}
		id = r.Msg.GetSession().GetSessionId()
	} else {
		// Echo's turns are scripted on a node no runner serves; exec and
		// model sessions run on a node of the fleet, for real.
		where := scriptNode
		if runtime != "echo" {
			where = m.leader.Name
		}
		r, err := op.CreateSession(m.ctx(), connect.NewRequest(&fakv1.CreateSessionRequest{Title: "matrix",
			Placement: &fakv1.Placement{RuntimeAdapter: runtime, Node: where}}))
		if err != nil {
			t.Fatal(err)
		}
		id = r.Msg.GetSession().GetSessionId()
	}
	s := &matrixSession{m: m, id: id, as: sessionsAs(c, n, token)}
	if st.other {
		other := attach(t, c, n, id, "browser", "bob")
		if err := takeLease(m.ctx(), c, n, id, other, false); err != nil {
			t.Fatal(err)
		}
	}
	if st.attach {
		r, err := s.as.Attach(m.ctx(), connect.NewRequest(&fakv1.AttachRequest{SessionId: id, ClientKind: "sdk", ClientName: "matrix"}))
		if err != nil {
			t.Fatalf("attach: %v", err)
		}
		s.att = r.Msg.GetAttachmentId()
	} else {
		// An observer acts with the operator's attachment: the refusal
		// that matters comes first.
		s.att = attach(t, c, n, id, "browser", "operator")
	}
	if st.hold {
		if _, err := s.as.TakeLease(m.ctx(), connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: id, AttachmentId: s.att})); err != nil {
			t.Fatalf("take the lease: %v", err)
		}
	}
	if (st.turn || st.approval) && runtime != "echo" {
		// The runtime itself runs the turn and asks for the approval.
		text := "a long job"
		if st.approval {
			text = "approve me"
		}
		if _, err := act(m.ctx(), c, n, id, s.att, 1, text); err != nil {
			t.Fatalf("input: %v", err)
		}
		c.WaitFor(30*time.Second, "the "+runtime+" runtime to "+text, func() bool {
			d, err := op.DescribeSession(m.ctx(), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
			if err != nil {
				return false
			}
			p := d.Msg.GetSession().GetPending()
			if st.approval {
				return p.GetApprovalSeq() != 0
			}
			evs := readAll(t, c, n, id, fakv1.ReadConsistency_READ_CONSISTENCY_STALE)
			return p.GetTurnInputSeq() != 0 && count(evs, "output") > 0
		})
	} else if st.turn || st.approval {
		if _, err := act(m.ctx(), c, n, id, s.att, 1, "a long job"); err != nil {
			t.Fatalf("input: %v", err)
		}
		evs := []*fakv1.EventInput{{Kind: "turn.started", Text: "script"}}
		if st.approval {
			evs = append(evs, &fakv1.EventInput{Kind: "tool.call", Text: "ls"}, &fakv1.EventInput{Kind: "approval.requested", Text: "run ls?"})
		}
		if _, err := c.RunnerClient(n).AppendRunnerEvents(m.ctx(), connect.NewRequest(&fakv1.AppendRunnerEventsRequest{
			SessionId: id, Epoch: 1, Events: evs})); err != nil {
			t.Fatalf("the turn: %v", err)
		}
	}
	if st.stop {
		if _, err := op.StopSession(m.ctx(), connect.NewRequest(&fakv1.StopSessionRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
	}
	att := s.att
	if !st.attach {
		att = ""
	}
	d, err := s.as.DescribeSession(m.ctx(), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id, AttachmentId: att}))
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	s.desc = d.Msg
	s.approvalAt = d.Msg.GetSession().GetPending().GetApprovalSeq()
	if s.approvalAt == 0 {
		s.approvalAt = d.Msg.GetSession().GetHeadSeq() // no approval there
	}
	return s
}

func (s *matrixSession) control(name string) *fakv1.Control {
	for _, c := range s.desc.GetCapabilities().GetControls() {
		if c.GetName() == name {
			return c
		}
	}
	return nil
}

// outcome is what acting on a control did: an error, or a success that
// changed nothing (noOp).
type outcome struct {
	err  error
	noOp bool
}

// act calls the procedure a client calls for control, as the caller.
func (s *matrixSession) act(control string) outcome {
	ctx, as, id, att := s.m.ctx(), s.as, s.id, s.att
	epoch := s.desc.GetSession().GetEpoch()
	var err error
	var noOp bool
	switch control {
	case "input.text":
		_, err = as.Act(ctx, connect.NewRequest(&fakv1.ActRequest{SessionId: id, AttachmentId: att, ExpectedEpoch: epoch,
			Action: &fakv1.ActRequest_Input{Input: &fakv1.InputText{Text: "hello"}}}))
	case "turn.interrupt":
		_, err = as.Act(ctx, connect.NewRequest(&fakv1.ActRequest{SessionId: id, AttachmentId: att, ExpectedEpoch: epoch,
			Action: &fakv1.ActRequest_Interrupt{Interrupt: &fakv1.InterruptTurn{}}}))
	case "lease.take", "lease.steal":
		var r *connect.Response[fakv1.TakeLeaseResponse]
		if r, err = as.TakeLease(ctx, connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: id, AttachmentId: att, Steal: control == "lease.steal"})); err == nil {
			noOp = r.Msg.GetAlreadyHeld()
		}
	case "lease.release":
		var r *connect.Response[fakv1.ReleaseLeaseResponse]
		if r, err = as.ReleaseLease(ctx, connect.NewRequest(&fakv1.ReleaseLeaseRequest{SessionId: id, AttachmentId: att})); err == nil {
			noOp = r.Msg.GetNoOp()
		}
	case "approval.answer":
		_, err = as.AnswerApproval(ctx, connect.NewRequest(&fakv1.AnswerApprovalRequest{SessionId: id, AttachmentId: att, ApprovalSeq: s.approvalAt, Approved: true}))
	case "session.stop":
		// Stopping a stopped session keeps the first reason: a no-op.
		var r *connect.Response[fakv1.StopSessionResponse]
		if r, err = as.StopSession(ctx, connect.NewRequest(&fakv1.StopSessionRequest{SessionId: id, Reason: "matrix"})); err == nil {
			noOp = r.Msg.GetSession().GetStopReason() != "matrix"
		}
	case "session.fresh":
		_, err = as.FreshSession(ctx, connect.NewRequest(&fakv1.FreshSessionRequest{SessionId: id}))
	case "session.reset":
		_, err = as.ResetSession(ctx, connect.NewRequest(&fakv1.ResetSessionRequest{SessionId: id}))
	case "session.clear":
		_, err = as.ClearSession(ctx, connect.NewRequest(&fakv1.ClearSessionRequest{SessionId: id}))
	case "session.new":
		_, err = as.NewSession(ctx, connect.NewRequest(&fakv1.NewSessionRequest{SessionId: id}))
	case "session.fork":
		_, err = as.ForkSession(ctx, connect.NewRequest(&fakv1.ForkSessionRequest{SessionId: id}))
	case "session.move":
		to := "n2"
		if s.desc.GetSession().GetPlacement().GetNode() == to {
			to = "n3"
		}
		_, err = as.MoveSession(ctx, connect.NewRequest(&fakv1.MoveSessionRequest{SessionId: id, ToNode: to}))
	case "detach":
		var r *connect.Response[fakv1.DetachResponse]
		if r, err = as.Detach(ctx, connect.NewRequest(&fakv1.DetachRequest{SessionId: id, AttachmentId: att})); err == nil {
			noOp = r.Msg.GetNoOp()
		}
	default:
		s.m.t.Fatalf("no procedure for %s", control)
	}
	return outcome{err: err, noOp: noOp}
}

// refusedWithoutEffect: c is unavailable for a reason the fleet answers
// with a refusal (or the contract's no-op), so acting on it changes
// nothing. The capability set's own reasons may be answered by a change.
func refusedWithoutEffect(c *fakv1.Control) bool {
	switch c.GetReason() {
	case "ALREADY_HELD", "NOT_HELD_BY_OTHER", "NOT_ATTACHED":
		return false
	}
	return !c.GetAvailable()
}

// judge compares what acting did with what the control advertised; ""
// when they agree.
func judge(c *fakv1.Control, got outcome) string {
	switch reason := c.GetReason(); {
	case c.GetAvailable() && (got.err != nil || got.noOp):
		return fmt.Sprintf("advertised available, but %s", got)
	case c.GetAvailable():
		return ""
	case reason == "LEASE_NOT_HELD" && c.GetName() == "lease.release", reason == "SESSION_STOPPED" && c.GetName() == "session.stop":
		// The contract's no-ops.
		if got.err != nil || !got.noOp {
			return fmt.Sprintf("advertised %s (%s), but %s; want a no-op", reason, c.GetMessage(), got)
		}
	case reason == "ALREADY_HELD" || reason == "NOT_HELD_BY_OTHER" || reason == "NOT_ATTACHED":
		// The capability set's own reasons: answered, or refused with them.
		if got.err != nil && reasonOf(got.err) != reason {
			return fmt.Sprintf("advertised %s (%s), but %s", reason, c.GetMessage(), got)
		}
	case reasonOf(got.err) != reason:
		return fmt.Sprintf("advertised %s (%s), but %s", reason, c.GetMessage(), got)
	}
	return ""
}

func (o outcome) String() string {
	switch {
	case o.err != nil:
		return "refused: " + o.err.Error()
	case o.noOp:
		return "a no-op"
	}
	return "done"
}
