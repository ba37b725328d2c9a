package journal

import (
	"encoding/json"
	"testing"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// ev builds an event; data is marshaled to JSON unless nil (a []byte is
// taken as is).
func ev(kind, text string, data any) *fakv1.Event {
	e := &fakv1.Event{SessionId: "ses_1", Kind: kind, Text: text}
	switch d := data.(type) {
	case nil:
	case []byte:
		e.Data = d
	default:
		b, err := json.Marshal(d)
		if err != nil {
			panic(err)
		}
		e.Data = b
	}
	return e
}

type m = map[string]any

// TestSummary is the wording of every kind, with the facts fsm writes (and
// the runner's), and the fallbacks when they are missing or unreadable.
func TestSummary(t *testing.T) {
	placement := m{"runtime_adapter": "echo", "node": "n1"}
	for _, tt := range []struct {
		ev   *fakv1.Event
		want string
	}{
		// Lifecycle.
		{ev("session.created", "demo", nil), "session created: demo"},
		{ev("session.created", "", nil), "session created"},
		{ev("session.stopped", "done", nil), "session stopped: done"},
		{ev("session.stopped", "USER_CLEAR", m{"child": "ses_c", "source": "clear"}), "session stopped: USER_CLEAR; continues as ses_c (clear)"},
		{ev("epoch.changed", "epoch 1: echo on n1", m{"epoch": 1, "placement": placement}), "epoch 1: echo on n1"},
		{ev("epoch.changed", "epoch 2: claude opus on n3",
			m{"epoch": 2, "placement": m{"runtime_adapter": "claude", "provider": "anthropic", "account_ref": "team-a", "model": "opus", "node": "n3"}}),
			"epoch 2: claude on n3, model opus, provider anthropic, account team-a"},
		{ev("epoch.changed", "", m{"epoch": 2, "placement": placement, "reason": "fresh", "provider_session_id": "fak_r1"}),
			"epoch 2: echo on n1 (fresh: provider session fak_r1, 0 cached provider entries pruned)"},
		{ev("epoch.changed", "", m{"epoch": 3, "placement": placement, "reason": "fresh", "provider_session_id": "fak_r2", "pruned": 1}),
			"epoch 3: echo on n1 (fresh: provider session fak_r2, 1 cached provider entry pruned)"},
		{ev("epoch.changed", "", m{"epoch": 4, "placement": placement, "reason": "resume", "provider_session_id": "th-9"}),
			"epoch 4: echo on n1 (resume: provider session th-9)"},
		{ev("epoch.changed", "", m{"epoch": 5, "placement": m{"runtime_adapter": "echo", "node": "n2"}, "reason": "move"}), "epoch 5: echo on n2 (move)"},
		{ev("epoch.changed", "", m{"epoch": 6, "placement": m{"model": "m"}}), "epoch 6: (no runtime adapter), model m"},
		{ev("epoch.changed", "", m{"epoch": 2, "placement": m{"runtime_adapter": "external", "provider": "claude", "launch_id": "lnc_1", "host": "laptop-7"},
			"reason": "launch"}), "epoch 2: external: claude on host laptop-7, launch lnc_1 (launch)"},
		// Attachments, the lease, input and approvals.
		{ev("attachment.joined", "terminal alice", m{"attachment_id": "att-1", "client_kind": "terminal", "client_name": "alice", "node": "n1",
			"capabilities": []string{"input.text", "approval.answer"}}), "terminal alice joined via n1"},
		{ev("attachment.left", "browser  left: expired", m{"attachment_id": "att-2", "client_kind": "browser", "node": "n2", "reason": "expired"}),
			"browser left (expired)"},
		{ev("attachment.left", "", m{"attachment_id": "att-3", "client_kind": ""}), "att-3 left"},
		{ev("lease.taken", "lease taken by terminal alice", m{"attachment_id": "att-1", "client_kind": "terminal", "client_name": "alice", "expires_unix_nano": 5}),
			"lease taken by terminal alice"},
		{ev("lease.taken", "lease stolen from ...", m{"attachment_id": "att-2", "client_kind": "browser", "stolen_from": "att-1", "stolen_from_name": "terminal alice"}),
			"lease taken by browser (stolen from terminal alice)"},
		{ev("lease.taken", "", m{"attachment_id": "att-2", "client_kind": "browser", "stolen_from": "att-1", "stolen_from_name": " "}),
			"lease taken by browser (stolen from att-1)"},
		{ev("lease.released", "", m{"attachment_id": "att-1", "client_kind": "terminal", "client_name": "alice", "reason": "expired"}),
			"lease released by terminal alice (expired)"},
		{ev("input", "hello there", m{"attachment_id": "att-1", "client_kind": "terminal", "client_name": "alice", "epoch": 1}), "terminal alice> hello there"},
		{ev("input", "two\nlines", m{"attachment_id": "att-1", "client_kind": "browser", "client_name": "bob"}), "browser bob> two\nlines"},
		{ev("approval.answered", "approved by browser bob",
			m{"approval_seq": 7, "approved": true, "attachment_id": "att-2", "client_kind": "browser", "client_name": "bob", "note": "go ahead"}),
			"approval #7 approved by browser bob: go ahead"},
		{ev("approval.answered", "denied by terminal", m{"approval_seq": 9, "approved": false, "attachment_id": "att-1", "client_kind": "terminal"}),
			"approval #9 denied by terminal"},
		// Runner events.
		{ev("turn.started", "echo on n1", m{"input_seq": 6, "node": "n1", "adapter": "echo"}), "turn started for input #6 (echo on n1)"},
		{ev("turn.started", "", nil), "turn started"},
		{ev("output", "Hello, ", nil), "agent> Hello, "},
		{ev("turn.completed", "turn 1 done", m{"status": "completed", "input_seq": 6, "cost": 3}), "turn completed (turn 1 done)"},
		{ev("turn.completed", "completed", m{"status": "completed", "input_seq": 6}), "turn completed"},
		{ev("turn.completed", "", m{}), "turn completed"},
		{ev("turn.completed", "failed: boom", m{"status": "failed", "input_seq": 14, "error": "boom"}), "turn failed: boom"},
		{ev("turn.completed", "refused: turn budget exhausted", m{"status": "refused", "reason": "BUDGET_EXHAUSTED", "input_seq": 3}), "turn refused"},
		// Interrupted: by a client, a move, a launch (the fleet writes these),
		// or closed by a runner after its predecessor left it open.
		{ev("turn.completed", "interrupted by terminal alice", m{"status": "interrupted", "input_seq": 6,
			"by": m{"attachment_id": "att-1", "client_kind": "terminal", "client_name": "alice"}}), "turn of input #6 interrupted by terminal alice"},
		{ev("turn.completed", "interrupted by move mov_1", m{"status": "interrupted", "input_seq": 9, "by": m{"move": "mov_1"}}),
			"turn of input #9 interrupted by move mov_1"},
		{ev("turn.completed", "interrupted by launch lnc_1", m{"status": "interrupted", "input_seq": 9, "by": m{"launch": "lnc_1"}}),
			"turn of input #9 interrupted by launch lnc_1"},
		{ev("turn.completed", "interrupted", m{"status": "interrupted", "input_seq": 4}), "turn of input #4 interrupted"},
		{ev("tool.call", "run ls", m{"tool": "shell", "args": "ls -la"}), "tool call: shell ls -la"},
		{ev("tool.call", "", m{"tool": "edit", "args": m{"path": "x.go", "line": 3}}), `tool call: edit {"line":3,"path":"x.go"}`},
		{ev("tool.call", "grep -r x", nil), "tool call: grep -r x"},
		{ev("tool.call", "ls", m{"tool": "shell"}), "tool call: shell ls"},
		{ev("tool.result", "a\nb\n", m{"tool": "shell"}), "tool result: a\nb\n"},
		{ev("approval.requested", "may I run ls?", m{"tool": "shell"}), "approval requested: may I run ls?"},
		{ev("approval.requested", "", nil), "approval requested"},
		// The reset ledger, provider hooks and budgets.
		{ev("reset_boundary", "context reset", m{"cleared_inputs": []uint64{5, 6}, "cleared_turn": 4, "cleared_approval": 7, "provider_session_id": "fak_r3", "context_rearmed_to": 1000}),
			"context reset: the agent's context starts after this point; cleared queued inputs #5 #6, the turn of input #4, approval #7; provider session fak_r3; context re-armed to 1000 tokens"},
		{ev("reset_boundary", "context reset", m{"provider_session_id": "fak_r4", "context_rearmed_to": 0}),
			"context reset: the agent's context starts after this point; provider session fak_r4"},
		{ev("fak.session.provider_boundary.v1", "clear of ses_p", m{"provider": "claude", "source": "clear", "previous_session": "ses_p", "new_provider_session_id": "abc"}),
			"clear of ses_p (claude provider session abc)"},
		{ev("fak.session.provider_boundary.v1", "new of ses_p", m{"provider": "", "source": "new", "previous_session": "ses_p", "new_provider_session_id": "fak_r5"}),
			"new of ses_p (provider session fak_r5)"},
		{ev("provider.bound", "claude abc", m{"provider": "claude", "source": "startup", "provider_session_id": "abc", "launch": "l1", "metadata": m{"cwd": "/x"}}),
			"claude session abc bound (startup, launch l1)"},
		{ev("provider.session_end", "claude session ended: clear", m{"provider": "claude", "reason": "clear", "provider_session_id": "abc", "launch": "l1"}),
			"claude session abc ended (clear, launch l1)"},
		{ev("compaction", "provider compaction", m{"provider": "codex", "source": "compact", "provider_session_id": "t1", "launch": "l1"}),
			"compaction by codex session t1 (launch l1)"},
		{ev("compaction", "kept 10 turns", m{"kept": 10}), "compaction: kept 10 turns [kept=10]"},
		{ev("compaction", "kept 10", nil), "compaction: kept 10"},
		{ev("budget.charged", "", m{"usage": m{"output_tokens": 100, "queries": 1, "spend_micros": 250000}, "context_tokens": 500, "envelope": "ses_p", "via_launch": "l1"}),
			"charged 100 output tokens, 1 query, spend 0.25; context +500 tokens (via launch l1)"},
		{ev("budget.charged", "", m{"usage": m{}, "envelope": "ses_p"}), "charged nothing"},
		{ev("budget.charged", "", m{"usage": m{"queries": 1}, "envelope": "ses_p", "incurred": true, "unmetered": "UNAUTHENTICATED"}),
			"charged 1 query (journaled late: unmetered when the call ended, UNAUTHENTICATED)"},
		{ev("budget.exhausted", "refused: spend_micros exhausted", m{"usage": m{"spend_micros": 100000}, "envelope": "ses_p", "exhausted": "spend_micros"}),
			"budget exhausted: spend; refused spend 0.1"},
		{ev("budget.exhausted", "refused: context_tokens exhausted", m{"usage": m{}, "context_tokens": 9, "exhausted": "context_tokens"}),
			"budget exhausted: context tokens; refused context +9 tokens"},
		{ev("session.forked", "forked from ses_p", m{"source_session": "ses_p", "fork_address": 16, "copied_events": 16}), "forked from ses_p at #16 (16 events copied)"},
		{ev("session.stranded", "stranded: compute node dead (n1)", m{"node": "n1", "stranded": true, "reason": "compute node dead"}), "stranded: compute node dead (n1)"},
		{ev("session.stranded", "no longer stranded: moved (n1)", m{"node": "n1", "reason": "moved"}), "no longer stranded: moved (n1)"},
		// Moves: every transition from its facts, with the time since the request.
		{ev("move.requested", "move requested: n1 → n2",
			m{"move_id": "mov_1", "state": "SAFE_POINT_REQUESTED", "cause": "operator", "from": "n1", "to": "n2", "source_epoch": 2}),
			"move mov_1 requested: n1 → n2 (operator); the session runs on n1 until the cutover"},
		{ev("move.requested", "move requested: n2 → any admitted node", m{"move_id": "mov_2", "state": "SAFE_POINT_REQUESTED", "cause": "drain", "from": "n2", "source_epoch": 3}),
			"move mov_2 requested: n2 → the least loaded admitted node (drain); the session runs on n2 until the cutover"},
		{ev("move.checkpointed", "checkpointed at #6",
			m{"move_id": "mov_1", "state": "CHECKPOINTED", "source_epoch": 2, "checkpoint_seq": 6, "digest": "ab", "elapsed_nanos": 18_400_000}),
			"move: checkpointed at #6 (+18ms)"},
		{ev("move.admitted", "destination n2 admitted",
			m{"move_id": "mov_1", "state": "DESTINATION_ADMITTED", "to": "n2", "placement": m{"runtime_adapter": "echo", "node": "n2"},
				"checks": []string{"alive", "not_draining", "capacity"}, "elapsed_nanos": 19_000_000}),
			"move: n2 admitted (alive, not_draining, capacity) (+19ms)"},
		{ev("move.admitted", "destination n1 admitted",
			m{"move_id": "mov_2", "state": "DESTINATION_ADMITTED", "to": "n1", "degradation": []string{`model "a" → "b": the provider cache starts cold`}}),
			`move: n1 admitted; degradation: model "a" → "b": the provider cache starts cold`},
		{ev("move.restored", "restored on n2 as epoch 3", m{"move_id": "mov_1", "state": "RESTORED", "to": "n2", "new_epoch": 3, "digest": "ab", "elapsed_nanos": 33_000_000}),
			"move: restored on n2 as epoch 3 (+33ms)"},
		{ev("move.cutover", "cutover: n1 → n2",
			m{"move_id": "mov_1", "state": "CUTOVER_COMMITTED", "from": "n1", "to": "n2", "new_epoch": 3, "cause": "operator", "elapsed_nanos": 34_000_000}),
			"move committed: n1 → n2, epoch 3 (+34ms)"},
		{ev("move.failed", "MOVE_FAILED in DESTINATION_ADMITTED: digest",
			m{"move_id": "mov_2", "state": "MOVE_FAILED", "phase": "DESTINATION_ADMITTED", "reason": "DIGEST_MISMATCH: restored\njournal differs", "from": "n2", "to": "n1", "elapsed_nanos": 5_000_000}),
			"move failed in DESTINATION_ADMITTED: DIGEST_MISMATCH: restored journal differs; the session stays on n2 (+5ms)"},
		{ev("move.unsafe", "MOVE_UNSAFE", m{"move_id": "mov_3", "state": "MOVE_UNSAFE", "phase": "SAFE_POINT_REQUESTED", "reason": "no safe point within 1s", "from": "n2"}),
			"move unsafe (no safe point) in SAFE_POINT_REQUESTED: no safe point within 1s; the session stays on n2"},
		// Annotations, including data that is not an object.
		{ev("note", "remember this", nil), "note: remember this"},
		{ev("checkpoint", "", nil), "checkpoint"},
		{ev("checkpoint", "cp", []byte(`[1,2]`)), "checkpoint: cp [[1,2]]"},
		{ev("note", "odd", []byte(`not json`)), "note: odd [8 bytes of data]"},
		{ev("note", "with facts", m{"by": "me", "n": 2, "s": "a b"}), `note: with facts [by=me n=2 s="a b"]`},
		{ev("custom.kind", "x", nil), "custom.kind: x"},
		// Facts that are missing or cannot be read: the kind, the text, the data.
		{ev("epoch.changed", "epoch 2: echo on n3", nil), "epoch.changed: epoch 2: echo on n3"},
		{ev("input", "hi", nil), "input> hi"},
		{ev("lease.taken", "lease taken", []byte("not json")), "lease.taken: lease taken [8 bytes of data]"},
		{ev("move.cutover", "cutover: n1 → n2", nil), "move.cutover: cutover: n1 → n2"},
		{ev("move.cutover", "cutover: n1 → n2", []byte(`garbage`)), "move.cutover: cutover: n1 → n2 [7 bytes of data]"},
		{ev("budget.charged", "", nil), "budget.charged"},
		{ev("approval.answered", "approved by x", m{"approved": true}), `approval.answered: approved by x [approved=true]`},
	} {
		if got := Summary(tt.ev); got != tt.want {
			t.Errorf("%s %q %s:\n got %q\nwant %q", tt.ev.GetKind(), tt.ev.GetText(), tt.ev.GetData(), got, tt.want)
		}
	}
}

// TestStyleNames: a client names itself (and others) its own way, in the
// same summary.
func TestStyleNames(t *testing.T) {
	st := Style{Name: func(c Client) string {
		if c.AttachmentID == "att_me" {
			return "you"
		}
		return ""
	}}
	me := m{"attachment_id": "att_me", "client_kind": "terminal", "client_name": "me@box"}
	for _, tt := range []struct {
		ev   *fakv1.Event
		want string
	}{
		{ev("attachment.joined", "", me), "you joined"},
		{ev("lease.taken", "", me), "lease taken by you"},
		{ev("lease.taken", "", m{"attachment_id": "att_a", "client_kind": "browser", "client_name": "alice", "stolen_from": "att_me", "stolen_from_name": "terminal me@box"}),
			"lease taken by browser alice (stolen from you)"},
		{ev("input", "hello", me), "you> hello"},
		{ev("approval.answered", "", m{"approval_seq": 8, "attachment_id": "att_me", "client_kind": "terminal", "note": "--approve no"}), "approval #8 denied by you: --approve no"},
		{ev("attachment.left", "", m{"attachment_id": "att_me", "client_kind": "terminal", "reason": "detached"}), "you left (detached)"},
		{ev("turn.completed", "", m{"status": "interrupted", "input_seq": 5, "by": me}), "turn of input #5 interrupted by you"},
	} {
		if got := st.Summary(tt.ev); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.ev.GetKind(), got, tt.want)
		}
	}
}

func TestFormat(t *testing.T) {
	for micros, want := range map[uint64]string{0: "0", 950000: "0.95", 3_000_000: "3", 1_000_001: "1.000001"} {
		if got := FormatSpend(micros); got != want {
			t.Errorf("FormatSpend(%d) = %q, want %q", micros, got, want)
		}
	}
	if got := Plural(2, "query") + ", " + Plural(1, "entry") + ", " + Plural(0, "refusal") + ", " + Plural(3, "day"); got != "2 queries, 1 entry, 0 refusals, 3 days" {
		t.Errorf("Plural: %q", got)
	}
	if got := FormatPlacement(&fakv1.Placement{RuntimeAdapter: "claude", Provider: "anthropic", AccountRef: "team-a", Model: "opus", Node: "n3"}); got != "claude on n3, model opus, provider anthropic, account team-a" {
		t.Errorf("FormatPlacement: %q", got)
	}
	if FormatPlacement(nil) != "" {
		t.Error("FormatPlacement(nil) is not empty")
	}
}
