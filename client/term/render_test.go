package term

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// event builds a journal event; data is marshaled to JSON unless nil.
func event(seq uint64, kind, text string, data any) *fakv1.Event {
	ev := &fakv1.Event{SessionId: "ses_1", Seq: seq, Kind: kind, Text: text}
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			panic(err)
		}
		ev.Data = b
	}
	return ev
}

type m = map[string]any

func TestRenderTranscript(t *testing.T) {
	r := newRenderer()
	r.addSelf("att_me")
	events := []*fakv1.Event{
		event(1, "session.created", "demo", nil),
		event(2, "epoch.changed", "epoch 1: echo on n1", m{"epoch": 1, "placement": m{"runtime_adapter": "echo", "model": "m1", "node": "n1"}}),
		event(3, "attachment.joined", "terminal me", m{"attachment_id": "att_me", "client_kind": "terminal", "client_name": "me@box", "node": "n1"}),
		event(4, "attachment.joined", "browser alice", m{"attachment_id": "att_a", "client_kind": "browser", "client_name": "alice", "node": "n2"}),
		event(5, "lease.taken", "", m{"attachment_id": "att_me", "client_kind": "terminal", "client_name": "me@box"}),
		event(6, "input", "hello", m{"attachment_id": "att_me", "client_kind": "terminal", "client_name": "me@box", "epoch": 1}),
		event(7, "turn.started", "echo on n1", m{"input_seq": 6, "node": "n1", "adapter": "echo"}),
		event(8, "output", "Hel", nil),
		event(9, "output", "lo!", nil),
		event(10, "attachment.left", "", m{"attachment_id": "att_b", "client_kind": "phone", "client_name": "bob", "reason": "expired"}),
		event(11, "output", " How are you?\n", nil),
		event(12, "turn.completed", "turn 1 done", m{"status": "completed", "input_seq": 6}),
		event(13, "lease.taken", "", m{"attachment_id": "att_a", "client_kind": "browser", "client_name": "alice", "stolen_from": "att_me", "stolen_from_name": "terminal me@box"}),
		event(14, "input", "two\nlines", m{"attachment_id": "att_a", "client_kind": "browser", "client_name": "alice"}),
		event(15, "turn.started", "", nil),
		event(16, "tool.call", "", m{"tool": "shell", "args": "ls -la"}),
		event(17, "approval.requested", "run ls -la?", nil),
		event(18, "approval.answered", "approved by terminal me@box", m{"approval_seq": 17, "approved": true, "attachment_id": "att_me", "client_kind": "terminal", "client_name": "me@box"}),
		event(19, "tool.result", "a\nb\n", nil),
		event(20, "tool.call", "", m{"tool": "edit", "args": m{"path": "x.go", "line": 3}}),
		event(21, "turn.completed", "failed: boom", m{"status": "failed", "input_seq": 14, "error": "boom"}),
		event(22, "lease.released", "", m{"attachment_id": "att_a", "client_kind": "browser", "client_name": "alice", "reason": "expired"}),
		event(23, "note", "remember this", nil),
		event(24, "checkpoint", "", nil),
		event(25, "compaction", "kept 10", nil),
		event(26, "session.stopped", "done", nil),
	}
	var b strings.Builder
	for _, ev := range events {
		b.WriteString(r.render(ev))
	}
	want := `#1 session created: demo
#2 epoch 1: echo on n1, model m1
#3 you joined via n1
#4 browser alice joined via n2
#5 lease taken by you
#6 you> hello
#7 turn started for input #6 (echo on n1)
#8 agent> Hello!
#10 phone bob left (expired)
#11 agent>  How are you?
#12 turn completed (turn 1 done)
#13 lease taken by browser alice (stolen from you)
#14 browser alice> two
    lines
#15 turn started
#16 tool call: shell ls -la
#17 approval requested: run ls -la? [y/n]
#18 approval #17 approved by you
#19 tool result: a
    b
#20 tool call: edit {"line":3,"path":"x.go"}
#21 turn failed: boom
#22 lease released by browser alice (expired)
#23 note: remember this
#24 checkpoint
#25 compaction: kept 10
#26 session stopped: done
`
	if got := b.String(); got != want {
		t.Errorf("transcript:\n%s\nwant:\n%s", got, want)
	}
}

// TestRenderLedgerEvents renders the events of the reset ledger, provider
// hooks and budgets with the facts fsm writes.
func TestRenderLedgerEvents(t *testing.T) {
	r := newRenderer()
	placement := m{"runtime_adapter": "echo", "node": "n1"}
	for _, tt := range []struct {
		ev   *fakv1.Event
		want string
	}{
		{event(4, "epoch.changed", "epoch 2: echo on n1 (fresh)", m{"epoch": 2, "placement": placement, "reason": "fresh", "provider_session_id": "fak_r1"}),
			"#4 epoch 2: echo on n1 (fresh: provider session fak_r1, 0 cached provider entries pruned)"},
		{event(5, "epoch.changed", "epoch 3: echo on n1 (fresh)", m{"epoch": 3, "placement": placement, "reason": "fresh", "provider_session_id": "fak_r2", "pruned": 1}),
			"#5 epoch 3: echo on n1 (fresh: provider session fak_r2, 1 cached provider entry pruned)"},
		{event(6, "epoch.changed", "epoch 4: echo on n1 (resume)", m{"epoch": 4, "placement": placement, "reason": "resume", "provider_session_id": "th-9"}),
			"#6 epoch 4: echo on n1 (resume: provider session th-9)"},
		{event(7, "reset_boundary", "context reset", m{"cleared_inputs": []uint64{5, 6}, "cleared_approval": 4, "provider_session_id": "fak_r3", "context_rearmed_to": 1000}),
			"#7 context reset: the agent's context starts after this point; cleared queued inputs #5 #6, approval #4; provider session fak_r3; context re-armed to 1000 tokens"},
		{event(8, "reset_boundary", "context reset", m{"provider_session_id": "fak_r4"}),
			"#8 context reset: the agent's context starts after this point; provider session fak_r4"},
		{event(9, "session.stopped", "USER_CLEAR", m{"child": "ses_c", "source": "clear"}),
			"#9 session stopped: USER_CLEAR; continues as ses_c (clear)"},
		{event(3, "fak.session.provider_boundary.v1", "clear of ses_p", m{"provider": "claude", "source": "clear", "previous_session": "ses_p", "new_provider_session_id": "abc"}),
			"#3 clear of ses_p (claude provider session abc)"},
		{event(3, "fak.session.provider_boundary.v1", "new of ses_p", m{"provider": "", "source": "new", "previous_session": "ses_p", "new_provider_session_id": "fak_r5"}),
			"#3 new of ses_p (provider session fak_r5)"},
		{event(10, "provider.bound", "claude abc", m{"provider": "claude", "source": "startup", "provider_session_id": "abc", "launch": "l1", "metadata": m{"cwd": "/x"}}),
			"#10 claude session abc bound (startup, launch l1)"},
		{event(11, "provider.session_end", "claude session ended: clear", m{"provider": "claude", "reason": "clear", "provider_session_id": "abc", "launch": "l1"}),
			"#11 claude session abc ended (clear, launch l1)"},
		{event(12, "compaction", "provider compaction", m{"provider": "codex", "source": "compact", "provider_session_id": "t1", "launch": "l1"}),
			"#12 compaction by codex session t1 (launch l1)"},
		{event(13, "compaction", "kept 10", nil), "#13 compaction: kept 10"},
		{event(14, "budget.charged", "", m{"usage": m{"output_tokens": 100, "queries": 1, "spend_micros": 250000}, "context_tokens": 500, "envelope": "ses_p", "via_launch": "l1"}),
			"#14 charged 100 output tokens, 1 query, spend 0.25; context +500 tokens (via launch l1)"},
		{event(15, "budget.exhausted", "refused: spend_micros exhausted", m{"usage": m{"spend_micros": 100000}, "envelope": "ses_p", "exhausted": "spend_micros"}),
			"#15 budget exhausted: spend; refused spend 0.1"},
		{event(16, "budget.exhausted", "refused: context_tokens exhausted", m{"usage": m{}, "context_tokens": 9, "exhausted": "context_tokens"}),
			"#16 budget exhausted: context tokens; refused context +9 tokens"},
		{event(17, "session.forked", "forked from ses_p", m{"source_session": "ses_p", "fork_address": 16, "copied_events": 16}),
			"#17 forked from ses_p at #16 (16 events copied)"},
		{event(18, "budget.charged", "", nil), "#18 budget.charged"},
	} {
		if got := r.render(tt.ev); got != tt.want+"\n" {
			t.Errorf("render %s:\n got %q\nwant %q", tt.ev.GetKind(), got, tt.want+"\n")
		}
	}
	if got := budgetLine(&fakv1.Envelope{Limits: &fakv1.Budget{SpendMicros: 2_000_000}, Used: &fakv1.Budget{SpendMicros: 1_950_000, Queries: 3}, Sessions: 3}); got != "queries 3, spend 1.95/2, shared by 3 sessions" {
		t.Errorf("budget line %q", got)
	}
}

func TestRenderNoticeEndsReply(t *testing.T) {
	var out bytes.Buffer
	tr := newTranscript(&out)
	tr.event(event(5, "output", "partial", nil))
	tr.notice("watch interrupted;\nresuming")
	tr.event(event(6, "output", " more", nil))
	tr.finish()
	tr.finish()
	want := "#5 agent> partial\n-- watch interrupted; resuming\n#6 agent>  more\n"
	if out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

func TestRenderFallbacks(t *testing.T) {
	r := newRenderer()
	for _, tt := range []struct {
		ev   *fakv1.Event
		want string
	}{
		{event(1, "epoch.changed", "epoch 2: echo on n3", nil), "#1 epoch.changed: epoch 2: echo on n3\n"},
		{event(2, "input", "hi", nil), "#2 input> hi\n"},
		{event(3, "approval.requested", "", nil), "#3 approval requested [y/n]\n"},
		{event(4, "tool.call", "grep -r x", nil), "#4 tool call: grep -r x\n"},
		{event(5, "lease.taken", "lease taken", []byte("not json")), "#5 lease.taken: lease taken [8 bytes of data]\n"},
		{event(6, "session.created", "", nil), "#6 session created\n"},
	} {
		if tt.ev.GetSeq() == 5 {
			tt.ev.Data = []byte("not json")
		}
		if got := r.render(tt.ev); got != tt.want {
			t.Errorf("render %s = %q, want %q", tt.ev.GetKind(), got, tt.want)
		}
	}
}

func TestHeaderAndControls(t *testing.T) {
	now := time.Unix(1000, 0)
	d := &fakv1.DescribeSessionResponse{
		Session: &fakv1.Session{
			SessionId: "ses_1", Title: "demo", Objective: "say hi", State: fakv1.SessionState_SESSION_STATE_ACTIVE,
			HeadSeq: 12, Epoch: 2, TurnsCompleted: 3,
			Placement:     &fakv1.Placement{RuntimeAdapter: "echo", Node: "n2"},
			Lease:         &fakv1.Lease{AttachmentId: "att_a", ClientKind: "browser", ClientName: "alice", ExpiresUnixNano: now.Add(time.Second).UnixNano()},
			Pending:       &fakv1.PendingInteraction{QueuedInputs: []uint64{11, 12}, TurnInputSeq: 9, ApprovalSeq: 10},
			ParentSession: "ses_0", ForkAddress: 40, BoundarySource: "fork",
			ContextCap: 1000, ContextUsed: 100,
		},
		Budget: &fakv1.Envelope{Limits: &fakv1.Budget{Turns: 10}, Used: &fakv1.Budget{Turns: 3, ToolCalls: 2}, Refusals: 1},
		Attachments: []*fakv1.Attachment{
			{AttachmentId: "att_a", ClientKind: "browser", ClientName: "alice", Node: "n2", Present: true, HoldsLease: true},
			{AttachmentId: "att_b", ClientKind: "terminal", ClientName: "bob@box", Node: "n1"},
		},
	}
	want := `session ses_1: demo [active]
  objective: say hi
  epoch 2: echo on n2
  head #12, 3 turns completed
  lineage: forked from ses_0 at #40
  context: 100 of 1000 tokens used
  budget: turns 3/10, tool calls 2, 1 refused
  pending: turn running for input #9; queued inputs #11 #12; approval #10 pending
  lease: held by browser alice (att_a)
  attachments:
    browser alice att_a (via n2, present, holds the lease)
    terminal bob@box att_b (via n1, away)
`
	if got := header(d, now); got != want {
		t.Errorf("header:\n%s\nwant:\n%s", got, want)
	}
	// An expired lease not yet reaped is shown as free.
	if got := header(d, now.Add(time.Minute)); !strings.Contains(got, "  lease: free\n") {
		t.Errorf("expired lease shown as held:\n%s", got)
	}
	d.Session.State = fakv1.SessionState_SESSION_STATE_STOPPED
	d.Session.StopReason = "done"
	d.Session.Title = ""
	if got := header(d, now); !strings.HasPrefix(got, "session ses_1: (untitled) [stopped (done)]\n") {
		t.Errorf("stopped header:\n%s", got)
	}
	d.Session.Provider, d.Session.ProviderSessionId, d.Session.ResetSeq = "claude", "abc", 11
	d.Session.BoundarySource, d.Session.ForkAddress = "clear", 0
	if got := header(d, now); !strings.Contains(got, "  lineage: clear of ses_0\n  provider: claude session abc\n  context reset at #11\n") {
		t.Errorf("header of a cleared child bound to a provider:\n%s", got)
	}

	cs := &fakv1.CapabilitySet{Version: 1, Controls: []*fakv1.Control{
		{Name: "input.text", Reason: "LEASE_NOT_HELD", Message: "the input lease is held by browser alice", Handoff: "lease.steal"},
		{Name: "lease.steal", Available: true},
		{Name: "approval.answer", Reason: "NO_PENDING_APPROVAL", Message: "no approval is pending"},
	}}
	cs.Controls = append(cs.Controls, &fakv1.Control{Name: "session.teleport", Available: true})
	wantControls := `controls (v1, as terminal me):
  input.text        text    unavailable: the input lease is held by browser alice (LEASE_NOT_HELD); instead: type /steal (lease.steal)
  lease.steal       /steal  available
  approval.answer   y or n  unavailable: no approval is pending (NO_PENDING_APPROVAL)
  session.teleport  -       unavailable: not supported by fak session open (UNSUPPORTED)
`
	if got := controls(cs, "as terminal me"); got != wantControls {
		t.Errorf("controls:\n%s\nwant:\n%s", got, wantControls)
	}
}

// TestRenderMoveEvents renders every transition of a move, as the facts fsm
// writes them, and the epoch.changed of its cutover; the header shows a
// move in progress.
func TestRenderMoveEvents(t *testing.T) {
	r := newRenderer()
	var b strings.Builder
	for _, ev := range []*fakv1.Event{
		event(6, "move.requested", "move requested: n1 → n2",
			m{"move_id": "mov_1", "state": "SAFE_POINT_REQUESTED", "cause": "operator", "from": "n1", "to": "n2", "source_epoch": 2}),
		event(7, "move.checkpointed", "checkpointed at #6",
			m{"move_id": "mov_1", "state": "CHECKPOINTED", "source_epoch": 2, "checkpoint_seq": 6, "digest": "ab", "elapsed_nanos": 18_400_000}),
		event(8, "move.admitted", "destination n2 admitted",
			m{"move_id": "mov_1", "state": "DESTINATION_ADMITTED", "to": "n2", "placement": m{"runtime_adapter": "echo", "node": "n2"},
				"checks": []string{"alive", "not_draining", "capacity"}, "elapsed_nanos": 19_000_000}),
		event(9, "move.restored", "restored on n2 as epoch 3",
			m{"move_id": "mov_1", "state": "RESTORED", "to": "n2", "new_epoch": 3, "digest": "ab", "elapsed_nanos": 33_000_000}),
		event(10, "epoch.changed", "epoch 3: echo on n2 (move)", m{"epoch": 3, "placement": m{"runtime_adapter": "echo", "node": "n2"}, "reason": "move"}),
		event(11, "move.cutover", "cutover: n1 → n2",
			m{"move_id": "mov_1", "state": "CUTOVER_COMMITTED", "from": "n1", "to": "n2", "new_epoch": 3, "cause": "operator", "elapsed_nanos": 34_000_000}),
		event(12, "move.requested", "move requested: n2 → any admitted node",
			m{"move_id": "mov_2", "state": "SAFE_POINT_REQUESTED", "cause": "drain", "from": "n2", "source_epoch": 3}),
		event(13, "move.admitted", "destination n1 admitted",
			m{"move_id": "mov_2", "state": "DESTINATION_ADMITTED", "to": "n1", "degradation": []string{`model "a" → "b": the provider cache starts cold`}}),
		event(14, "move.failed", "MOVE_FAILED in DESTINATION_ADMITTED: digest",
			m{"move_id": "mov_2", "state": "MOVE_FAILED", "phase": "DESTINATION_ADMITTED", "reason": "DIGEST_MISMATCH: restored journal differs", "from": "n2", "to": "n1", "elapsed_nanos": 5_000_000}),
		event(15, "move.unsafe", "MOVE_UNSAFE",
			m{"move_id": "mov_3", "state": "MOVE_UNSAFE", "phase": "SAFE_POINT_REQUESTED", "reason": "no safe point within 1s", "from": "n2"}),
		event(16, "move.cutover", "cutover: n1 → n2", nil),
	} {
		b.WriteString(r.render(ev))
	}
	want := `#6 move mov_1 requested: n1 → n2 (operator); the session runs on n1 until the cutover
#7 move: checkpointed at #6 (+18ms)
#8 move: n2 admitted (alive, not_draining, capacity) (+19ms)
#9 move: restored on n2 as epoch 3 (+33ms)
#10 epoch 3: echo on n2 (move)
#11 move committed: n1 → n2, epoch 3 (+34ms)
#12 move mov_2 requested: n2 → the least loaded admitted node (drain); the session runs on n2 until the cutover
#13 move: n1 admitted; degradation: model "a" → "b": the provider cache starts cold
#14 move failed in DESTINATION_ADMITTED: DIGEST_MISMATCH: restored journal differs; the session stays on n2 (+5ms)
#15 move unsafe (no safe point) in SAFE_POINT_REQUESTED: no safe point within 1s; the session stays on n2
#16 move.cutover: cutover: n1 → n2
`
	if got := b.String(); got != want {
		t.Errorf("transcript:\n%s\nwant:\n%s", got, want)
	}

	// The tracker follows the cutover's epoch: the next input goes to it.
	var tr tracker
	tr.init(&fakv1.DescribeSessionResponse{Session: &fakv1.Session{Epoch: 2}}, time.Now())
	tr.apply(event(10, "epoch.changed", "", m{"epoch": 3, "reason": "move"}))
	tr.apply(event(11, "move.cutover", "", m{"move_id": "mov_1", "state": "CUTOVER_COMMITTED", "new_epoch": 3}))
	if tr.epoch != 3 {
		t.Errorf("epoch %d after a move's cutover, want 3", tr.epoch)
	}

	d := &fakv1.DescribeSessionResponse{Session: &fakv1.Session{SessionId: "ses_1", Title: "demo", Epoch: 2,
		State:     fakv1.SessionState_SESSION_STATE_ACTIVE,
		Placement: &fakv1.Placement{RuntimeAdapter: "echo", Node: "n1"},
		Move:      &fakv1.Move{MoveId: "mov_1", State: "CHECKPOINTED", SourceNode: "n1", Target: &fakv1.Placement{Node: "n2"}},
	}}
	if got := header(d, time.Now()); !strings.Contains(got, "  epoch 2: echo on n1\n  head #0, 0 turns completed\n  move in progress: n1 → n2 (CHECKPOINTED, mov_1)\n") {
		t.Errorf("header with a move in progress:\n%s", got)
	}
	d.Session.Move.State = "CUTOVER_COMMITTED"
	if got := header(d, time.Now()); strings.Contains(got, "move") {
		t.Errorf("header shows a finished move:\n%s", got)
	}
}
