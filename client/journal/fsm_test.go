package journal_test

// This test drives the real FSM (through its exported API, as raft does)
// through a scenario that writes every kind of the journal, then decodes
// every event the FSM wrote with the client's vocabulary. Only this test
// imports fsm; the package itself depends on the API's types alone.

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/client/journal"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

const (
	t0   int64 = 1_700_000_000_000_000_000
	tick int64 = 1_000_000 // 1ms per command
	ttl  int64 = 10e9
)

// fleet applies commands to an FSM one log entry each, stamping them with
// a clock that advances a tick per command.
type fleet struct {
	t     *testing.T
	f     *fsm.FSM
	index uint64
	clock int64
}

func (fl *fleet) apply(c *fsmpb.Command) *fsmpb.Result {
	fl.t.Helper()
	fl.clock += tick
	c.TimeUnixNano = fl.clock
	data, err := fsm.EncodeBatch([]*fsmpb.Command{c})
	if err != nil {
		fl.t.Fatal(err)
	}
	fl.index++
	rs, ok := fl.f.Apply(&raft.Log{Index: fl.index, Term: 1, Type: raft.LogCommand, Data: data}).([]*fsmpb.Result)
	if !ok || len(rs) != 1 {
		fl.t.Fatalf("apply %T: no result", c.GetBody())
	}
	return rs[0]
}

// ok applies c and fails the test when the FSM refuses it.
func (fl *fleet) ok(c *fsmpb.Command) *fsmpb.Result {
	fl.t.Helper()
	r := fl.apply(c)
	if r.GetError() != nil {
		fl.t.Fatalf("%T: %s: %s", c.GetBody(), r.GetError().GetReason(), r.GetError().GetMessage())
	}
	return r
}

// journal reads a session's events as a client receives them.
func (fl *fleet) journal(id string) []*fakv1.Event {
	fl.t.Helper()
	evs, _, err := fl.f.Events(id, 1, 10_000)
	if err != nil {
		fl.t.Fatal(err)
	}
	out := make([]*fakv1.Event, len(evs))
	for i, e := range evs {
		out[i] = &fakv1.Event{SessionId: id, Seq: e.GetSeq(), TimeUnixNano: e.GetTimeUnixNano(), Kind: e.GetKind(), Text: e.GetText(), Data: e.GetData()}
	}
	return out
}

func cmd(body any) *fsmpb.Command {
	c := &fsmpb.Command{}
	reflect.ValueOf(c).Elem().FieldByName("Body").Set(reflect.ValueOf(body))
	return c
}

func jsonOf(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// scenario writes every kind of the journal: in s1 (created, attached,
// leased, a turn with a tool call and an approval, charges, fresh, reset,
// provider hooks, annotations, moves, stranding, detaches, then cleared),
// its fork, and the child of its clear.
func scenario(t *testing.T) *fleet {
	f, err := fsm.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fl := &fleet{t: t, f: f, clock: t0}
	const s1 = "s1"
	fl.ok(cmd(&fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: s1, Title: "demo",
		Placement: &fsmpb.Placement{RuntimeAdapter: "echo", Model: "m1", Node: "n1"},
		Policy:    &fsmpb.Policy{Limits: &fsmpb.Budget{SpendMicros: 1000}, ContextCap: 1000}}}))
	fl.ok(cmd(&fsmpb.Command_Attach{Attach: &fsmpb.Attach{SessionId: s1, AttachmentId: "att-1", ClientKind: "terminal", ClientName: "alice",
		Capabilities: []string{"input.text", "approval.answer"}, Node: "n1", TtlNanos: ttl}}))
	fl.ok(cmd(&fsmpb.Command_Attach{Attach: &fsmpb.Attach{SessionId: s1, AttachmentId: "att-2", ClientKind: "browser", Node: "n2", TtlNanos: ttl}}))
	fl.ok(cmd(&fsmpb.Command_TakeLease{TakeLease: &fsmpb.TakeLease{SessionId: s1, AttachmentId: "att-1", TtlNanos: ttl}}))
	fl.ok(cmd(&fsmpb.Command_TakeLease{TakeLease: &fsmpb.TakeLease{SessionId: s1, AttachmentId: "att-2", Steal: true, TtlNanos: ttl}}))
	fl.ok(cmd(&fsmpb.Command_ReleaseLease{ReleaseLease: &fsmpb.ReleaseLease{SessionId: s1, AttachmentId: "att-2", Reason: "released"}}))
	fl.ok(cmd(&fsmpb.Command_TakeLease{TakeLease: &fsmpb.TakeLease{SessionId: s1, AttachmentId: "att-1", TtlNanos: ttl}}))
	in := fl.ok(cmd(&fsmpb.Command_SubmitInput{SubmitInput: &fsmpb.SubmitInput{SessionId: s1, AttachmentId: "att-1", ExpectedEpoch: 1, Text: "hello"}}))
	inputSeq := in.GetAppend().GetFirstSeq()
	tool := jsonOf(map[string]any{"tool": "shell", "args": "ls"})
	r := fl.ok(cmd(&fsmpb.Command_RunnerAppend{RunnerAppend: &fsmpb.RunnerAppend{SessionId: s1, Epoch: 1, Events: []*fsmpb.EventInput{
		{Kind: fsm.KindTurnStarted, Text: "echo on n1", Data: jsonOf(map[string]any{"input_seq": inputSeq, "node": "n1", "adapter": "echo"})},
		{Kind: fsm.KindOutput, Text: "echo: hello"},
		{Kind: fsm.KindToolCall, Text: "ls", Data: tool},
		{Kind: fsm.KindApprovalRequested, Text: "run ls?", Data: tool},
	}}}))
	approvalSeq := r.GetAppend().GetLastSeq()
	fl.ok(cmd(&fsmpb.Command_AnswerApproval{AnswerApproval: &fsmpb.AnswerApproval{SessionId: s1, AttachmentId: "att-2", ApprovalSeq: approvalSeq, Approved: true, Note: "fine"}}))
	fl.ok(cmd(&fsmpb.Command_RunnerAppend{RunnerAppend: &fsmpb.RunnerAppend{SessionId: s1, Epoch: 1, Events: []*fsmpb.EventInput{
		{Kind: fsm.KindToolResult, Text: "ran ls", Data: jsonOf(map[string]any{"tool": "shell", "args": "ls", "approved": true})},
		{Kind: fsm.KindTurnCompleted, Text: "completed", Data: jsonOf(map[string]any{"status": "completed", "input_seq": inputSeq})},
	}}}))
	fl.ok(cmd(&fsmpb.Command_RecordUsage{RecordUsage: &fsmpb.RecordUsage{SessionId: s1, Usage: &fsmpb.Budget{Turns: 1, Queries: 1, SpendMicros: 600}, ContextTokens: 100}}))
	if r := fl.apply(cmd(&fsmpb.Command_RecordUsage{RecordUsage: &fsmpb.RecordUsage{SessionId: s1, Usage: &fsmpb.Budget{SpendMicros: 600}}})); r.GetError().GetReason() != "BUDGET_EXHAUSTED" {
		t.Fatalf("over the limit: %v", r.GetError())
	}
	fl.ok(cmd(&fsmpb.Command_FreshSession{FreshSession: &fsmpb.FreshSession{SessionId: s1, ProviderSessionId: "fak_f1"}}))
	fl.ok(cmd(&fsmpb.Command_SubmitInput{SubmitInput: &fsmpb.SubmitInput{SessionId: s1, AttachmentId: "att-1", ExpectedEpoch: 2, Text: "dropped"}}))
	fl.ok(cmd(&fsmpb.Command_ResetSession{ResetSession: &fsmpb.ResetSession{SessionId: s1, ProviderSessionId: "fak_r1"}}))
	// A turn the lease holder interrupts: the fleet closes it.
	in = fl.ok(cmd(&fsmpb.Command_SubmitInput{SubmitInput: &fsmpb.SubmitInput{SessionId: s1, AttachmentId: "att-1", ExpectedEpoch: 2, Text: "long"}}))
	fl.ok(cmd(&fsmpb.Command_RunnerAppend{RunnerAppend: &fsmpb.RunnerAppend{SessionId: s1, Epoch: 2, Events: []*fsmpb.EventInput{
		{Kind: fsm.KindTurnStarted, Text: "echo on n1", Data: jsonOf(map[string]any{"input_seq": in.GetAppend().GetFirstSeq(), "node": "n1", "adapter": "echo"})},
	}}}))
	fl.ok(cmd(&fsmpb.Command_InterruptTurn{InterruptTurn: &fsmpb.InterruptTurn{SessionId: s1, AttachmentId: "att-1", ExpectedEpoch: 2}}))
	// A guarded launch, its session external (as the API creates it): the
	// provider's hooks.
	fl.ok(cmd(&fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "g1", Title: "claude in /x",
		Placement: &fsmpb.Placement{RuntimeAdapter: fsm.ExternalRuntime, Provider: "claude", LaunchId: "l1", Host: "laptop"}}}))
	fl.ok(cmd(&fsmpb.Command_BindLaunch{BindLaunch: &fsmpb.BindLaunch{LaunchId: "l1", Provider: "claude", SessionId: "g1", Host: "laptop"}}))
	fl.ok(cmd(&fsmpb.Command_ProviderSessionStart{ProviderSessionStart: &fsmpb.ProviderSessionStart{LaunchId: "l1", Source: "startup", ProviderSessionId: "p1", Metadata: []byte(`{"cwd":"/x"}`)}}))
	fl.ok(cmd(&fsmpb.Command_ProviderSessionStart{ProviderSessionStart: &fsmpb.ProviderSessionStart{LaunchId: "l1", Source: "compact", ProviderSessionId: "p1"}}))
	fl.ok(cmd(&fsmpb.Command_ProviderSessionStart{ProviderSessionStart: &fsmpb.ProviderSessionStart{LaunchId: "l1", Source: "resume", ProviderSessionId: "p2"}}))
	fl.ok(cmd(&fsmpb.Command_ProviderSessionEnd{ProviderSessionEnd: &fsmpb.ProviderSessionEnd{LaunchId: "l1", Reason: "logout", ProviderSessionId: "p2"}}))
	// Annotations any client may append.
	fl.ok(cmd(&fsmpb.Command_AppendEvents{AppendEvents: &fsmpb.AppendEvents{SessionId: s1, Events: []*fsmpb.EventInput{
		{Kind: fsm.KindNote, Text: "a note"},
		{Kind: fsm.KindCheckpoint, Text: "cp", Data: []byte(`{"at":3}`)},
		{Kind: fsm.KindCompaction, Text: "kept 10"},
	}}}))
	// A move that commits, one that fails and one that finds no safe point.
	digest := strings.Repeat("ab", 32)
	fl.ok(cmd(&fsmpb.Command_RequestMove{RequestMove: &fsmpb.RequestMove{SessionId: s1, MoveId: "mov_1", Target: &fsmpb.Placement{Node: "n2"}, Cause: fsm.MoveCauseOperator}}))
	s, err := f.Session(s1)
	if err != nil {
		t.Fatal(err)
	}
	fl.ok(cmd(&fsmpb.Command_MoveCheckpoint{MoveCheckpoint: &fsmpb.MoveCheckpoint{SessionId: s1, MoveId: "mov_1", SourceEpoch: s.GetEpoch(), CheckpointSeq: s.GetHeadSeq(), Digest: digest}}))
	fl.ok(cmd(&fsmpb.Command_MoveAdmit{MoveAdmit: &fsmpb.MoveAdmit{SessionId: s1, MoveId: "mov_1",
		Placement: &fsmpb.Placement{RuntimeAdapter: "echo", Model: "m1", Node: "n2"}, Checks: []string{"alive", "capacity"}}}))
	fl.ok(cmd(&fsmpb.Command_MoveRestore{MoveRestore: &fsmpb.MoveRestore{SessionId: s1, MoveId: "mov_1", NewEpoch: fsm.NextEpoch(s), Digest: digest}}))
	fl.ok(cmd(&fsmpb.Command_MoveCutover{MoveCutover: &fsmpb.MoveCutover{SessionId: s1, MoveId: "mov_1"}}))
	// The first turn after the move: its warm-up.
	in = fl.ok(cmd(&fsmpb.Command_SubmitInput{SubmitInput: &fsmpb.SubmitInput{SessionId: s1, AttachmentId: "att-1", ExpectedEpoch: 3, Text: "after the move"}}))
	fl.ok(cmd(&fsmpb.Command_RunnerAppend{RunnerAppend: &fsmpb.RunnerAppend{SessionId: s1, Epoch: 3, Events: []*fsmpb.EventInput{
		{Kind: fsm.KindTurnStarted, Text: "echo on n2", Data: jsonOf(map[string]any{"input_seq": in.GetAppend().GetFirstSeq(), "node": "n2", "adapter": "echo"})},
	}}}))
	fl.ok(cmd(&fsmpb.Command_RunnerAppend{RunnerAppend: &fsmpb.RunnerAppend{SessionId: s1, Epoch: 3, Events: []*fsmpb.EventInput{
		{Kind: fsm.KindTurnCompleted, Text: "completed", Data: jsonOf(map[string]any{"status": "completed", "input_seq": in.GetAppend().GetFirstSeq()})},
	}}}))
	fl.ok(cmd(&fsmpb.Command_RequestMove{RequestMove: &fsmpb.RequestMove{SessionId: s1, MoveId: "mov_2", Cause: fsm.MoveCauseDrain, Interrupt: true}}))
	fl.ok(cmd(&fsmpb.Command_MoveFail{MoveFail: &fsmpb.MoveFail{SessionId: s1, MoveId: "mov_2", Reason: "no node admits it"}}))
	fl.ok(cmd(&fsmpb.Command_RequestMove{RequestMove: &fsmpb.RequestMove{SessionId: s1, MoveId: "mov_3", Target: &fsmpb.Placement{Node: "n1"}, Cause: fsm.MoveCauseOperator}}))
	fl.ok(cmd(&fsmpb.Command_MoveFail{MoveFail: &fsmpb.MoveFail{SessionId: s1, MoveId: "mov_3", Reason: "no safe point within 1s", Unsafe: true}}))
	fl.ok(cmd(&fsmpb.Command_MarkStranded{MarkStranded: &fsmpb.MarkStranded{SessionId: s1, Node: "n2", Stranded: true}}))
	fl.ok(cmd(&fsmpb.Command_MarkStranded{MarkStranded: &fsmpb.MarkStranded{SessionId: s1, Node: "n2", Stranded: false}}))
	fl.ok(cmd(&fsmpb.Command_Detach{Detach: &fsmpb.Detach{SessionId: s1, AttachmentId: "att-2", Reason: "detached"}}))
	fl.ok(cmd(&fsmpb.Command_Detach{Detach: &fsmpb.Detach{SessionId: s1, AttachmentId: "att-1", Reason: "expired"}}))
	// A fork, then a clear: a child session each.
	fl.ok(cmd(&fsmpb.Command_ForkSession{ForkSession: &fsmpb.ForkSession{SourceSessionId: s1, AtSeq: 3, ForkSessionId: "s1-fork"}}))
	fl.ok(cmd(&fsmpb.Command_ClearSession{ClearSession: &fsmpb.ClearSession{SessionId: s1, Source: "clear", Reason: "USER_CLEAR", Provider: "claude", ProviderSessionId: "p3"}}))
	fl.ok(cmd(&fsmpb.Command_StopSession{StopSession: &fsmpb.StopSession{SessionId: fsm.ChildSessionID(s1, "p3"), Reason: "done"}}))
	return fl
}

// TestEveryKindDecodes: every event the FSM writes, of every kind, decodes
// with the client's vocabulary, strictly (no field the client does not
// know), and the first of each kind decodes to the form in the table. A
// kind fsm gains fails the test until the table (and the scenario) has it.
func TestEveryKindDecodes(t *testing.T) {
	fl := scenario(t)
	at := func(n int64) int64 { return t0 + n*tick } // the time of the nth command
	echo := func(node string) *journal.Placement {
		return &journal.Placement{RuntimeAdapter: "echo", Model: "m1", Node: node}
	}
	yes := true
	warm := &journal.Cache{Cache: fsm.CacheWarm, Why: "same provider, model, account and thread: the provider's cache can still be warm"}
	want := map[string]journal.Fact{
		journal.KindSessionCreated: nil,
		journal.KindEpochChanged: journal.EpochChange{Epoch: 1, Placement: &journal.Placement{
			RuntimeAdapter: "external", Provider: "claude", LaunchID: "l1", Host: "laptop"}},
		journal.KindAttachmentJoined:  journal.Attachment{AttachmentID: "att-1", ClientKind: "terminal", ClientName: "alice", Node: "n1", Capabilities: []string{"input.text", "approval.answer"}},
		journal.KindLeaseTaken:        journal.Lease{AttachmentID: "att-1", ClientKind: "terminal", ClientName: "alice", ExpiresUnixNano: at(4) + ttl},
		journal.KindLeaseReleased:     journal.Lease{AttachmentID: "att-2", ClientKind: "browser", Reason: "released"},
		journal.KindInput:             journal.Input{AttachmentID: "att-1", ClientKind: "terminal", ClientName: "alice", Epoch: 1},
		journal.KindTurnStarted:       journal.Turn{InputSeq: 9, Node: "n1", Adapter: "echo"},
		journal.KindOutput:            nil,
		journal.KindToolCall:          journal.Tool{Tool: "shell", Args: json.RawMessage(`"ls"`)},
		journal.KindApprovalRequested: journal.Tool{Tool: "shell", Args: json.RawMessage(`"ls"`)},
		journal.KindApprovalAnswered:  journal.ApprovalAnswer{ApprovalSeq: 13, Approved: true, AttachmentID: "att-2", ClientKind: "browser", Note: "fine"},
		journal.KindToolResult:        journal.Tool{Tool: "shell", Args: json.RawMessage(`"ls"`), Approved: &yes},
		journal.KindTurnCompleted:     journal.Turn{Status: "completed", InputSeq: 9},
		journal.KindBudgetCharged:     journal.Charge{Usage: &journal.Budget{Turns: 1, Queries: 1, SpendMicros: 600}, ContextTokens: 100, Envelope: "s1"},
		journal.KindBudgetExhausted:   journal.Charge{Usage: &journal.Budget{SpendMicros: 600}, Envelope: "s1", Exhausted: "spend_micros"},
		journal.KindResetBoundary:     journal.Reset{ClearedInputs: []uint64{20}, ProviderSessionID: "fak_r1", ContextRearmedTo: 1000},
		journal.KindNote:              nil,
		journal.KindCheckpoint:        nil,
		journal.KindCompaction:        journal.Provider{Provider: "claude", Source: "compact", ProviderSessionID: "p1", Launch: "l1"},
		journal.KindProviderBound:     journal.Provider{Provider: "claude", Source: "startup", ProviderSessionID: "p1", Launch: "l1", Metadata: json.RawMessage(`{"cwd":"/x"}`)},
		journal.KindProviderEnd:       journal.Provider{Provider: "claude", Reason: "logout", ProviderSessionID: "p2", Launch: "l1"},
		journal.KindMoveRequested:     journal.Move{MoveID: "mov_1", State: fsm.MoveSafePointRequested, Cause: "operator", From: "n1", To: "n2", SourceEpoch: 2},
		journal.KindMoveCheckpointed:  journal.Move{MoveID: "mov_1", State: fsm.MoveCheckpointed, SourceEpoch: 2, CheckpointSeq: 28, Digest: strings.Repeat("ab", 32), ElapsedNanos: tick},
		journal.KindMoveAdmitted:      journal.Move{MoveID: "mov_1", State: fsm.MoveAdmitted, To: "n2", Placement: echo("n2"), Checks: []string{"alive", "capacity"}, ElapsedNanos: 2 * tick},
		journal.KindMoveRestored:      journal.Move{MoveID: "mov_1", State: fsm.MoveRestored, To: "n2", NewEpoch: 3, Digest: strings.Repeat("ab", 32), ElapsedNanos: 3 * tick, Cache: warm},
		journal.KindMoveWarmed:        journal.Move{MoveID: "mov_1", State: fsm.MoveCutoverCommitted, To: "n2", NewEpoch: 3, ElapsedNanos: 7 * tick, Cache: warm, WarmupNanos: tick, InputSeq: 34},
		journal.KindMoveCutover:       journal.Move{MoveID: "mov_1", State: fsm.MoveCutoverCommitted, Cause: "operator", From: "n1", To: "n2", NewEpoch: 3, ElapsedNanos: 4 * tick},
		journal.KindMoveFailed:        journal.Move{MoveID: "mov_2", State: fsm.MoveFailed, From: "n2", Reason: "no node admits it", Phase: fsm.MoveSafePointRequested, ElapsedNanos: tick},
		journal.KindMoveUnsafe:        journal.Move{MoveID: "mov_3", State: fsm.MoveUnsafe, From: "n2", Reason: "no safe point within 1s", Phase: fsm.MoveSafePointRequested, ElapsedNanos: tick},
		journal.KindSessionStranded:   journal.Stranded{Node: "n2", Stranded: true, Reason: fsm.StrandedReason},
		journal.KindAttachmentLeft:    journal.Attachment{AttachmentID: "att-2", ClientKind: "browser", Node: "n2", Reason: "detached"},
		journal.KindSessionForked:     journal.Fork{SourceSession: "s1", ForkAddress: 3, CopiedEvents: 3},
		journal.KindSessionStopped:    journal.Stop{Child: fsm.ChildSessionID("s1", "p3"), Source: "clear"},
		journal.KindProviderBoundary:  journal.ProviderBoundary{Provider: "claude", Source: "clear", PreviousSession: "s1", NewProviderSessionID: "p3"},
	}

	// The vocabularies agree, and the table covers all of it.
	if got, fsmKinds := journal.Kinds(), fsm.Kinds(); !slices.Equal(got, fsmKinds) {
		t.Errorf("client/journal kinds differ from fsm's:\n client %q\n    fsm %q", got, fsmKinds)
	}
	for _, k := range fsm.Kinds() {
		if !journal.Known(k) {
			t.Errorf("fsm writes %q, which client/journal does not know", k)
		}
		if _, ok := want[k]; !ok {
			t.Errorf("kind %q has no decoded form in this table (and, likely, no event in the scenario)", k)
		}
	}

	seen := map[string]bool{}
	for _, id := range []string{"g1", "s1", "s1-fork", fsm.ChildSessionID("s1", "p3")} {
		for _, e := range fl.journal(id) {
			got, err := journal.Decode(e)
			if err != nil && !(err == journal.ErrNoData && len(e.GetData()) == 0) {
				t.Errorf("%s #%d %s: %v (data %s)", id, e.GetSeq(), e.GetKind(), err, e.GetData())
				continue
			}
			if got != nil && len(e.GetData()) > 0 {
				strict := reflect.New(reflect.TypeOf(got))
				dec := json.NewDecoder(bytes.NewReader(e.GetData()))
				dec.DisallowUnknownFields()
				if err := dec.Decode(strict.Interface()); err != nil {
					t.Errorf("%s #%d %s: the client's %T misses a field fsm writes: %v", id, e.GetSeq(), e.GetKind(), got, err)
				}
			}
			if fsm.KnownKind(e.GetKind()) && !fsm.AppendableKind(e.GetKind()) {
				// fsm's and the runner's kinds get words of their own, not
				// the generic "kind: text [data]".
				if s := journal.Summary(e); strings.HasPrefix(s, e.GetKind()) {
					t.Errorf("%s #%d %s: generic summary %q", id, e.GetSeq(), e.GetKind(), s)
				}
			}
			if seen[e.GetKind()] {
				continue
			}
			seen[e.GetKind()] = true
			if w := want[e.GetKind()]; !reflect.DeepEqual(got, w) {
				t.Errorf("%s #%d %s decodes to\n %#v\nwant\n %#v", id, e.GetSeq(), e.GetKind(), got, w)
			}
			t.Logf("%s #%d %-32s %s", id, e.GetSeq(), e.GetKind(), journal.Summary(e))
		}
	}
	for _, k := range fsm.Kinds() {
		if !seen[k] {
			t.Errorf("the scenario writes no %s event: extend it", k)
		}
	}
}
