package main

import (
	"testing"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

func TestEventSummary(t *testing.T) {
	expires := eventTime(20).UnixNano()
	tests := []struct {
		kind, text, data string
		want             string
	}{
		{"session.created", "demo", "", "demo"},
		{"session.stopped", "done", "", "done"},
		{"epoch.changed", "epoch 1: echo on n1",
			`{"epoch":1,"placement":{"runtime_adapter":"echo","node":"n1"}}`,
			"epoch 1: echo on n1"},
		{"epoch.changed", "epoch 2: claude opus on n3",
			`{"epoch":2,"placement":{"runtime_adapter":"claude","provider":"anthropic","account_ref":"team-a","model":"opus","node":"n3"}}`,
			"epoch 2: claude on n3, model opus, provider anthropic, account team-a"},
		{"attachment.joined", "terminal alice",
			`{"attachment_id":"att-1","client_kind":"terminal","client_name":"alice","node":"n1","capabilities":["input.text","approval.answer"]}`,
			"terminal alice (att-1) joined via n1; can input.text, approval.answer"},
		{"attachment.left", "browser  left: expired",
			`{"attachment_id":"att-2","client_kind":"browser","node":"n2","reason":"expired"}`,
			"browser (att-2) left: expired"},
		{"lease.taken", "lease taken by terminal alice",
			`{"attachment_id":"att-1","client_kind":"terminal","client_name":"alice","expires_unix_nano":` + formatInt(expires) + `}`,
			"taken by terminal alice (att-1), expires " + formatClock(expires)},
		{"lease.taken", "lease stolen from ...",
			`{"attachment_id":"att-2","client_kind":"browser","expires_unix_nano":` + formatInt(expires) + `,"stolen_from":"att-1","stolen_from_name":"terminal alice"}`,
			"stolen from terminal alice (att-1) by browser (att-2), expires " + formatClock(expires)},
		{"lease.released", "lease released by terminal alice: expired",
			`{"attachment_id":"att-1","client_kind":"terminal","client_name":"alice","reason":"expired"}`,
			"released by terminal alice (att-1): expired"},
		{"input", "hello there",
			`{"attachment_id":"att-1","client_kind":"terminal","client_name":"alice","epoch":1}`,
			"terminal alice: hello there"},
		{"approval.answered", "approved by browser bob",
			`{"approval_seq":7,"approved":true,"attachment_id":"att-2","client_kind":"browser","client_name":"bob","note":"go ahead"}`,
			"approved (request 7) by browser bob: go ahead"},
		{"approval.answered", "denied by terminal",
			`{"approval_seq":9,"approved":false,"attachment_id":"att-1","client_kind":"terminal"}`,
			"denied (request 9) by terminal"},
		// Runner events: the text and whatever facts came with it.
		{"turn.started", "turn for input 5", `{"input_seq":5,"epoch":1}`, "turn for input 5 [epoch=1 input_seq=5]"},
		{"output", "Hello, ", "", "Hello, "},
		{"tool.call", "run ls", `{"tool":"shell","args":{"cmd":"ls -l"},"needs_approval":true}`,
			`run ls [args={"cmd":"ls -l"} needs_approval=true tool=shell]`},
		{"tool.result", "", `{"tool":"shell","output":"a b"}`, `[output="a b" tool=shell]`},
		{"approval.requested", "may I run ls?", `{"tool":"shell"}`, "may I run ls? [tool=shell]"},
		{"turn.completed", "", `{}`, ""},
		// The reset ledger, provider hooks and budgets.
		{"epoch.changed", "epoch 2: echo on n1 (fresh)",
			`{"epoch":2,"placement":{"runtime_adapter":"echo","node":"n1"},"reason":"fresh","provider_session_id":"fak_r1"}`,
			"epoch 2: echo on n1 (fresh: provider session fak_r1, 0 cached provider entries pruned)"},
		{"epoch.changed", "epoch 3: echo on n1 (resume)",
			`{"epoch":3,"placement":{"runtime_adapter":"echo","node":"n1"},"reason":"resume","provider_session_id":"th-9"}`,
			"epoch 3: echo on n1 (resume: provider session th-9)"},
		{"reset_boundary", "context reset",
			`{"cleared_inputs":[7,8],"cleared_approval":6,"provider_session_id":"fak_r2","context_rearmed_to":1000}`,
			"context reset, cleared queued inputs 7, 8, approval request 6; provider session fak_r2; context re-armed to 1000 tokens"},
		{"reset_boundary", "context reset", `{"provider_session_id":"fak_r3","context_rearmed_to":0}`,
			"context reset; provider session fak_r3"},
		{"session.stopped", "USER_CLEAR", `{"child":"ses_c","source":"clear"}`, "USER_CLEAR; continues as ses_c (clear)"},
		{"fak.session.provider_boundary.v1", "clear of ses_p",
			`{"provider":"claude","source":"clear","previous_session":"ses_p","new_provider_session_id":"abc"}`,
			"clear of ses_p; claude provider session abc"},
		{"fak.session.provider_boundary.v1", "new of ses_p",
			`{"provider":"","source":"new","previous_session":"ses_p","new_provider_session_id":"fak_r4"}`,
			"new of ses_p; provider session fak_r4"},
		{"provider.bound", "claude abc",
			`{"provider":"claude","source":"startup","provider_session_id":"abc","launch":"l1","metadata":{"cwd":"/x"}}`,
			"claude session abc bound (startup), launch l1"},
		{"provider.session_end", "claude session ended: clear",
			`{"provider":"claude","reason":"clear","provider_session_id":"abc","launch":"l1"}`,
			"claude session abc ended: clear, launch l1"},
		{"compaction", "provider compaction", `{"provider":"codex","source":"compact","provider_session_id":"t1","launch":"l1"}`,
			"provider compaction (codex session t1)"},
		{"compaction", "kept 10 turns", `{"kept":10}`, "kept 10 turns [kept=10]"},
		{"budget.charged", "",
			`{"usage":{"output_tokens":100,"queries":1,"spend_micros":250000},"context_tokens":500,"envelope":"ses_p","via_launch":"l1"}`,
			"charged 100 output tokens, 1 query, spend 0.25; context +500 tokens (via launch l1)"},
		{"budget.exhausted", "refused: spend_micros exhausted",
			`{"usage":{"spend_micros":100000},"envelope":"ses_p","exhausted":"spend_micros"}`,
			"refused: spend exhausted; asked spend 0.1"},
		{"budget.exhausted", "refused: context_tokens exhausted",
			`{"usage":{},"context_tokens":9,"envelope":"ses_p","exhausted":"context_tokens"}`,
			"refused: context tokens exhausted; asked context +9 tokens"},
		{"session.forked", "forked from ses_p", `{"source_session":"ses_p","fork_address":5,"copied_events":5}`,
			"forked from ses_p at seq 5 (5 events copied)"},
		// Moves: every transition from its facts, with the time since the request.
		{"move.requested", "move requested: n1 → n2",
			`{"move_id":"mov_1","state":"SAFE_POINT_REQUESTED","cause":"operator","from":"n1","to":"n2","source_epoch":2}`,
			"mov_1 requested (operator): n1 epoch 2 → n2"},
		{"move.requested", "move requested: n1 → any admitted node",
			`{"move_id":"mov_1","state":"SAFE_POINT_REQUESTED","cause":"drain","from":"n1","source_epoch":2}`,
			"mov_1 requested (drain): n1 epoch 2 → any admitted node"},
		{"move.checkpointed", "checkpointed at #41",
			`{"move_id":"mov_1","state":"CHECKPOINTED","source_epoch":2,"checkpoint_seq":41,"digest":"0123456789abcdef0123","elapsed_nanos":18000000}`,
			"mov_1 checkpointed at seq 41 (epoch 2, digest 0123456789ab…) (+18ms)"},
		{"move.admitted", "destination n2 admitted",
			`{"move_id":"mov_1","state":"DESTINATION_ADMITTED","to":"n2","placement":{"runtime_adapter":"echo","model":"m2","node":"n2"},` +
				`"checks":["alive","capacity"],"degradation":["model \"m1\" → \"m2\""],"elapsed_nanos":19000000}`,
			`mov_1 n2 admitted as echo on n2, model m2 (alive, capacity); degradation: model "m1" → "m2" (+19ms)`},
		{"move.restored", "restored on n2 as epoch 3",
			`{"move_id":"mov_1","state":"RESTORED","to":"n2","new_epoch":3,"digest":"x","elapsed_nanos":33000000}`,
			"mov_1 restored on n2 as epoch 3 (+33ms)"},
		{"move.cutover", "cutover: n1 → n2",
			`{"move_id":"mov_1","state":"CUTOVER_COMMITTED","cause":"operator","from":"n1","to":"n2","new_epoch":3,"elapsed_nanos":34000000}`,
			"mov_1 cutover n1 → n2, epoch 3 (operator) (+34ms)"},
		{"move.failed", "MOVE_FAILED in CHECKPOINTED: n2 refused",
			`{"move_id":"mov_1","state":"MOVE_FAILED","reason":"n2 refused: alive: gossip says dead","phase":"CHECKPOINTED","from":"n1","elapsed_nanos":5000000}`,
			"mov_1 MOVE_FAILED in CHECKPOINTED: n2 refused: alive: gossip says dead (+5ms)"},
		{"move.unsafe", "MOVE_UNSAFE",
			`{"move_id":"mov_1","state":"MOVE_UNSAFE","reason":"no safe point within 1s","phase":"SAFE_POINT_REQUESTED"}`,
			"mov_1 MOVE_UNSAFE in SAFE_POINT_REQUESTED: no safe point within 1s"},
		{"move.cutover", "cutover: n1 → n2", `garbage`, "cutover: n1 → n2"},
		{"epoch.changed", "epoch 3: echo on n2 (move)",
			`{"epoch":3,"placement":{"runtime_adapter":"echo","node":"n2"},"reason":"move"}`,
			"epoch 3: echo on n2 (move)"},
		// Notes and other annotations, including data that is not an object.
		{"note", "plain", "", "plain"},
		{"checkpoint", "cp", `[1,2]`, "cp [[1,2]]"},
		{"note", "odd", `not json`, "odd [8 bytes of data]"},
		// Facts that cannot be read fall back to the text.
		{"lease.taken", "lease taken by x", `garbage`, "lease taken by x"},
		{"input", "typed", "", "typed"},
	}
	for _, tt := range tests {
		ev := &fakv1.Event{Kind: tt.kind, Text: tt.text}
		if tt.data != "" {
			ev.Data = []byte(tt.data)
		}
		if got := eventSummary(ev); got != tt.want {
			t.Errorf("%s %q %s:\n got %q\nwant %q", tt.kind, tt.text, tt.data, got, tt.want)
		}
	}
}

func formatInt(n int64) string { return formatUint(uint64(n)) }
