package runner_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/echo"
)

// local is a one-replica "cluster" for runner tests: commands are applied
// straight to a real FSM as consecutive log entries, stamped with the
// wall clock like a leader would.
type local struct {
	t *testing.T
	f *fsm.FSM

	mu    sync.Mutex
	index uint64
	// indeterminate makes the next n runner writes apply and then report a
	// transient error, like a leader lost right after committing.
	indeterminate int
	requestIDs    []string // of runner appends
	turnCharges   []string // request ids of runner appends charging a turn
	usages        []string // request ids of runner appends charging usage
	charges       []string // request ids of RecordUsage calls
	// beforeTurnStart, when set, runs before a runner append that starts
	// a turn is applied: commands it applies land between the runner's
	// read of the session and its turn.started.
	beforeTurnStart func()
	// beforeMoveStep, when set, runs before a checkpoint, restore or
	// move failure is applied: commands it applies land between the
	// runner's read of the session and its step.
	beforeMoveStep func()
	// onSync, when set, runs at a read barrier (Writer.Sync): commands it
	// applies are what the cluster had committed and this replica had
	// not yet applied.
	onSync func()
}

func newLocal(t *testing.T) *local {
	f, err := fsm.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &local{t: t, f: f}
}

func (l *local) apply(cmd *fsmpb.Command) *fsmpb.Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.index++
	cmd.TimeUnixNano = time.Now().UnixNano()
	data, err := fsm.EncodeBatch([]*fsmpb.Command{cmd})
	if err != nil {
		l.t.Fatal(err)
	}
	return l.f.Apply(&raft.Log{Index: l.index, Term: 1, Type: raft.LogCommand, Data: data}).([]*fsmpb.Result)[0]
}

// must applies a setup command that has to succeed.
func (l *local) must(cmd *fsmpb.Command) *fsmpb.Result {
	l.t.Helper()
	res := l.apply(cmd)
	if err := fsm.ResultError(res); err != nil {
		l.t.Fatalf("%T: %v", cmd.Body, err)
	}
	return res
}

func (l *local) AppendRunnerEvents(_ context.Context, w runner.Append) (runner.Appended, error) {
	cmd := &fsmpb.RunnerAppend{SessionId: w.SessionID, Epoch: w.Epoch, ChargeTurn: w.ChargeTurn, Usage: w.Usage, StartsInput: w.StartsInput, TurnOnly: w.TurnOnly}
	if b := w.Binding; b != nil {
		cmd.Binding = &fsmpb.ProviderBinding{Provider: b.Provider, ThreadId: b.ThreadID}
	}
	for _, ev := range w.Events {
		cmd.Events = append(cmd.Events, &fsmpb.EventInput{Kind: ev.Kind, Text: ev.Text, Data: ev.Data})
	}
	l.mu.Lock()
	hook := l.beforeTurnStart
	l.mu.Unlock()
	if hook != nil && w.ChargeTurn {
		hook()
	}
	res := l.apply(&fsmpb.Command{RequestId: w.RequestID, Body: &fsmpb.Command_RunnerAppend{RunnerAppend: cmd}})
	l.mu.Lock()
	l.requestIDs = append(l.requestIDs, w.RequestID)
	if w.ChargeTurn {
		l.turnCharges = append(l.turnCharges, w.RequestID)
	}
	if w.Usage != nil {
		l.usages = append(l.usages, w.RequestID)
	}
	fail := l.indeterminate > 0
	if fail {
		l.indeterminate--
	}
	l.mu.Unlock()
	if err := fsm.ResultError(res); err != nil {
		return runner.Appended{}, err
	}
	if fail {
		return runner.Appended{}, runner.Transient(errors.New("leadership lost while committing"))
	}
	a := res.GetAppend()
	return runner.Appended{First: a.FirstSeq, Last: a.LastSeq, TurnRefused: a.TurnRefused, UsageRefused: a.UsageRefused}, nil
}

func (l *local) CommitCheckpoint(_ context.Context, id, moveID string, epoch, seq uint64, digest string, ws *fsmpb.Workspace) (uint64, error) {
	return l.moveStep(&fsmpb.Command{Body: &fsmpb.Command_MoveCheckpoint{MoveCheckpoint: &fsmpb.MoveCheckpoint{
		SessionId: id, MoveId: moveID, SourceEpoch: epoch, CheckpointSeq: seq, Digest: digest, Workspace: ws}}})
}

// moveStep applies a move step and returns the head its result names.
func (l *local) moveStep(cmd *fsmpb.Command) (uint64, error) {
	l.mu.Lock()
	hook := l.beforeMoveStep
	l.mu.Unlock()
	if hook != nil {
		hook()
	}
	res := l.apply(cmd)
	if err := fsm.ResultError(res); err != nil {
		return 0, err
	}
	return res.GetSession().GetHeadSeq(), nil
}

func (l *local) RecordWorkspaceCopy(_ context.Context, id string, epoch uint64, cp *fsmpb.WorkspaceCopy) error {
	return fsm.ResultError(l.apply(&fsmpb.Command{Body: &fsmpb.Command_RecordWorkspaceCopy{RecordWorkspaceCopy: &fsmpb.RecordWorkspaceCopy{
		SessionId: id, Epoch: epoch, Copy: cp}}}))
}

func (l *local) CommitRestore(_ context.Context, id, moveID string, epoch uint64, digest string, t *fsmpb.WorkspaceTransfer) (uint64, error) {
	return l.moveStep(&fsmpb.Command{Body: &fsmpb.Command_MoveRestore{MoveRestore: &fsmpb.MoveRestore{
		SessionId: id, MoveId: moveID, NewEpoch: epoch, Digest: digest, Transfer: t}}})
}

func (l *local) FailMove(_ context.Context, id, moveID, reason string) (uint64, error) {
	return l.moveStep(&fsmpb.Command{Body: &fsmpb.Command_MoveFail{MoveFail: &fsmpb.MoveFail{
		SessionId: id, MoveId: moveID, Reason: reason}}})
}

// RecordUsage charges usage like LifecycleService.RecordUsage.
func (l *local) RecordUsage(_ context.Context, id string, usage *fsmpb.Budget, reqID string) error {
	res := l.apply(&fsmpb.Command{RequestId: reqID, Body: &fsmpb.Command_RecordUsage{RecordUsage: &fsmpb.RecordUsage{
		SessionId: id, Usage: usage}}})
	l.mu.Lock()
	l.charges = append(l.charges, reqID)
	l.mu.Unlock()
	return fsm.ResultError(res)
}

// Sync: the local FSM is the whole cluster.
func (l *local) Sync(context.Context, string) error {
	l.mu.Lock()
	f := l.onSync
	l.onSync = nil
	l.mu.Unlock()
	if f != nil {
		f()
	}
	return nil
}

// session creates a session placed on node with adapter, attaches a
// terminal holding the lease, and returns the session id.
func (l *local) session(id, node, adapter string) string {
	return l.sessionWithPolicy(id, node, adapter, nil)
}

// sessionWithPolicy is session with a budget policy for its new envelope.
func (l *local) sessionWithPolicy(id, node, adapter string, p *fsmpb.Policy) string {
	l.must(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{
		SessionId: id, Placement: &fsmpb.Placement{RuntimeAdapter: adapter, Node: node}, Policy: p}}})
	l.attachTerm(id)
	return id
}

// attachTerm attaches the terminal "term" to a session and takes the lease.
func (l *local) attachTerm(id string) {
	l.must(&fsmpb.Command{Body: &fsmpb.Command_Attach{Attach: &fsmpb.Attach{
		SessionId: id, AttachmentId: "term", ClientKind: "terminal", TtlNanos: int64(time.Minute)}}})
	l.must(&fsmpb.Command{Body: &fsmpb.Command_TakeLease{TakeLease: &fsmpb.TakeLease{
		SessionId: id, AttachmentId: "term", TtlNanos: int64(time.Minute)}}})
}

// reset appends a reset boundary and returns its seq.
func (l *local) reset(id, providerID string) uint64 {
	l.t.Helper()
	return l.must(&fsmpb.Command{Body: &fsmpb.Command_ResetSession{ResetSession: &fsmpb.ResetSession{
		SessionId: id, ProviderSessionId: providerID}}}).GetBoundary().GetSession().GetResetSeq()
}

// clear stops a session as a user's clear would and returns its child,
// with the terminal attached and holding the lease.
func (l *local) clear(id, providerID string) string {
	l.t.Helper()
	child := l.must(&fsmpb.Command{Body: &fsmpb.Command_ClearSession{ClearSession: &fsmpb.ClearSession{
		SessionId: id, Source: "clear", Reason: fsm.StopUserClear, ProviderSessionId: providerID}}}).GetBoundary().GetSession().GetSessionId()
	l.attachTerm(child)
	return child
}

// waitEnvelope polls a session's budget envelope until cond holds
// (deadline 10s).
func (l *local) waitEnvelope(id, what string, cond func(*fsmpb.Envelope) bool) *fsmpb.Envelope {
	l.t.Helper()
	s, err := l.f.Session(id)
	if err != nil {
		l.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		e, err := l.f.Envelope(s.EnvelopeId)
		if err == nil && cond(e) {
			return e
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("timed out waiting for %s (envelope %v, err %v)", what, e, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (l *local) input(id, text string) uint64 {
	l.t.Helper()
	return l.must(&fsmpb.Command{Body: &fsmpb.Command_SubmitInput{SubmitInput: &fsmpb.SubmitInput{
		SessionId: id, AttachmentId: "term", ExpectedEpoch: 1, Text: text}}}).GetAppend().FirstSeq
}

func (l *local) answer(id string, seq uint64, approved bool) *fsmpb.Result {
	l.t.Helper()
	return l.must(&fsmpb.Command{Body: &fsmpb.Command_AnswerApproval{AnswerApproval: &fsmpb.AnswerApproval{
		SessionId: id, AttachmentId: "term", ApprovalSeq: seq, Approved: approved}}})
}

func (l *local) journal(id string) []*fsmpb.Event {
	evs, _, err := l.f.Events(id, 1, 10000)
	if err != nil {
		l.t.Fatal(err)
	}
	return evs
}

// waitSession polls the session until cond holds (deadline 10s).
func (l *local) waitSession(id, what string, cond func(*fsmpb.Session) bool) *fsmpb.Session {
	l.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := l.f.Session(id)
		if err == nil && cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("timed out waiting for %s (session %v, err %v)", what, s, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startRunner runs a runner for node "n1" with echo turns of length turn.
func (l *local) startRunner(turn time.Duration, logs *syncBuffer) *runner.Runner {
	return l.startRunnerWith(logs, echo.New(echo.Options{TurnDuration: turn}))
}

// startRunnerWith runs a runner for node "n1" with the given adapters.
func (l *local) startRunnerWith(logs *syncBuffer, adapters ...runner.Adapter) *runner.Runner {
	logger := hclog.NewNullLogger()
	if logs != nil {
		logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Warn})
	}
	r := runner.New(runner.Config{Node: "n1", FSM: l.f, Writer: l, Adapters: adapters, Logger: logger})
	r.Start()
	l.t.Cleanup(r.Stop)
	return r
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// transcript renders the runner's part of a journal after seq `after` as
// "kind:text" lines, output chunks of one reply joined. The runner's
// budget charges (budget.charged, before and after each turn) are left
// out: budget_test.go checks them.
func transcript(evs []*fsmpb.Event, after uint64) string {
	var lines []string
	for _, ev := range evs {
		if ev.Seq <= after || ev.Kind == fsm.KindBudgetCharged {
			continue
		}
		if ev.Kind == fsm.KindOutput && len(lines) > 0 && strings.HasPrefix(lines[len(lines)-1], "output:") {
			lines[len(lines)-1] += ev.Text
			continue
		}
		lines = append(lines, ev.Kind+":"+ev.Text)
	}
	return strings.Join(lines, "\n")
}
