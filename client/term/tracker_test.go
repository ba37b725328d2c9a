package term

import (
	"context"
	"strings"
	"testing"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

func TestTracker(t *testing.T) {
	var tr tracker
	tr.init(&fakv1.DescribeSessionResponse{Session: &fakv1.Session{
		Epoch: 1, HeadSeq: 10,
		Pending: &fakv1.PendingInteraction{QueuedInputs: []uint64{9}, TurnInputSeq: 7, ApprovalSeq: 8},
		Lease:   &fakv1.Lease{AttachmentId: "att_a", ClientKind: "browser", ClientName: "alice", ExpiresUnixNano: time.Now().Add(time.Minute).UnixNano()},
	}}, time.Now())
	tr.replayed(event(10, "approval.answered", "", m{"approval_seq": 8, "approved": true}))
	if tr.answerable() {
		t.Fatal("approval #8 answered in the replay is still answerable")
	}
	if tr.holderName() != "browser alice" {
		t.Fatalf("holder %q", tr.holderName())
	}
	for _, ev := range []*fakv1.Event{
		event(11, "tool.result", "ok", nil),
		event(12, "turn.completed", "", nil),
		event(13, "input", "b", nil),
		event(14, "turn.started", "", nil), // the oldest queued input: #9
	} {
		tr.apply(ev)
	}
	if tr.completed[7] != "completed" || tr.turn != 9 || len(tr.queue) != 1 || tr.queue[0] != 13 {
		t.Fatalf("after turn of #7: completed %v, turn %d, queue %v", tr.completed, tr.turn, tr.queue)
	}
	for _, ev := range []*fakv1.Event{
		event(15, "approval.requested", "run?", nil),
		event(16, "lease.released", "", m{"attachment_id": "att_a", "reason": "expired"}),
		event(17, "epoch.changed", "", m{"epoch": 2}),
	} {
		tr.apply(ev)
	}
	if !tr.answerable() || tr.approval != 15 || tr.approvalTurn != 9 || tr.holderName() != "nobody" || tr.epoch != 2 {
		t.Fatalf("approval %d (turn %d, answerable %v), holder %q, epoch %d", tr.approval, tr.approvalTurn, tr.answerable(), tr.holderName(), tr.epoch)
	}
	tr.apply(event(18, "turn.completed", "", nil))
	// A runner that names the input is believed over queue order.
	tr.apply(event(19, "input", "c", nil))
	tr.apply(event(20, "turn.started", "", m{"input_seq": 19}))
	if tr.turn != 19 || len(tr.queue) != 1 || tr.queue[0] != 13 || tr.answerable() {
		t.Fatalf("turn %d, queue %v", tr.turn, tr.queue)
	}
	tr.apply(event(21, "turn.completed", "interrupted", m{"status": "interrupted", "input_seq": 19}))
	tr.apply(event(22, "input", "d", nil))
	tr.apply(event(23, "reset_boundary", "context reset", m{"cleared_inputs": []uint64{13, 22}}))
	if tr.completed[19] != "interrupted" || !strings.Contains(tr.completed[22], "reset") || len(tr.queue) != 0 {
		t.Fatalf("completed %v, queue %v", tr.completed, tr.queue)
	}
	tr.apply(event(24, "session.stopped", "bye", nil))
	if !tr.stopped || tr.stopReason != "bye" || tr.child != "" {
		t.Fatal("stop not tracked")
	}
	var cleared tracker
	cleared.init(&fakv1.DescribeSessionResponse{Session: &fakv1.Session{Epoch: 1}}, time.Now())
	cleared.apply(event(5, "session.stopped", "PROVIDER_SESSION_CLEAR", m{"child": "ses_c", "source": "clear"}))
	if !cleared.stopped || cleared.child != "ses_c" || cleared.childSource != "clear" {
		t.Fatalf("a clear's child not tracked: %+v", cleared)
	}
}

func TestReadLines(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	var got []string
	for l := range readLines(strings.NewReader("a\r\nb\n\nlast"), done) {
		got = append(got, l)
	}
	if strings.Join(got, "|") != "a|b||last" {
		t.Fatalf("lines %q", got)
	}
	line, ok := nextInputLine(context.Background(), readLines(strings.NewReader("\n  \nx\n"), done))
	if !ok || line != "x" {
		t.Fatalf("nextInputLine = %q, %v", line, ok)
	}
	if _, ok := nextInputLine(context.Background(), readLines(strings.NewReader("\n"), done)); ok {
		t.Fatal("a blank stdin has input")
	}
}

func TestNormalizeAPIAddr(t *testing.T) {
	if got, err := normalizeAPIAddr("10.0.0.2:7402", "https"); err != nil || got != "https://10.0.0.2:7402" {
		t.Errorf("endpoint with scheme https = %q, %v", got, err)
	}
}
