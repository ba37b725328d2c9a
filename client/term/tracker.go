package term

import (
	"slices"
	"strings"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/client/journal"
)

// tracker follows the session's interaction state through the journal,
// from the descriptor's state at its head: the epoch, queued inputs and the
// running turn (turns take queued inputs oldest first), the pending
// approval, the lease holder and whether the session stopped.
type tracker struct {
	epoch uint64
	queue []uint64
	// turn is the input whose turn is running (0: none); completed holds
	// the inputs whose turns ended since the client started, with how
	// ("completed", "failed: ...", "interrupted", "cleared by a reset").
	turn      uint64
	completed map[uint64]string
	// approval is the pending approval.requested (0: none), asked by the
	// turn of input approvalTurn.
	approval     uint64
	approvalTurn uint64
	answered     bool
	lease        struct{ id, kind, name string }
	stopped      bool
	stopReason   string
	// child and childSource: the session a clear or new continued in.
	child, childSource string
}

func (t *tracker) init(d *fakv1.DescribeSessionResponse, now time.Time) {
	s := d.GetSession()
	t.epoch = s.GetEpoch()
	t.queue = slices.Clone(s.GetPending().GetQueuedInputs())
	t.turn = s.GetPending().GetTurnInputSeq()
	t.completed = make(map[uint64]string)
	t.approval = s.GetPending().GetApprovalSeq()
	t.approvalTurn = t.turn
	if l := s.GetLease(); l.GetAttachmentId() != "" && l.GetExpiresUnixNano() > now.UnixNano() {
		t.lease.id, t.lease.kind, t.lease.name = l.GetAttachmentId(), l.GetClientKind(), l.GetClientName()
	}
	t.stopped = s.GetState() == fakv1.SessionState_SESSION_STATE_STOPPED
	t.stopReason = s.GetStopReason()
}

// replayed notes what a replayed event (at or before the descriptor's
// head) says about the state init took from the descriptor: whether the
// pending approval was already answered.
func (t *tracker) replayed(ev *fakv1.Event) {
	if ev.GetKind() == journal.KindApprovalAnswered {
		if f, err := journal.Decode(ev); err == nil && f.(journal.ApprovalAnswer).ApprovalSeq == t.approval {
			t.answered = true
		}
	}
}

// apply advances the state past one event after the descriptor's head.
func (t *tracker) apply(ev *fakv1.Event) {
	fact, _ := journal.Decode(ev)
	switch ev.GetKind() {
	case journal.KindEpochChanged:
		f, _ := fact.(journal.EpochChange)
		t.epoch = max(t.epoch, f.Epoch)
	case journal.KindInput:
		t.queue = append(t.queue, ev.GetSeq())
	case journal.KindTurnStarted:
		f, _ := fact.(journal.Turn)
		in := uint64(0)
		if i := slices.Index(t.queue, f.InputSeq); f.InputSeq != 0 && i >= 0 {
			in = f.InputSeq
			t.queue = slices.Delete(t.queue, i, i+1)
		} else if len(t.queue) > 0 {
			in = t.queue[0]
			t.queue = t.queue[1:]
		}
		t.turn = in
	case journal.KindTurnCompleted:
		f, _ := fact.(journal.Turn)
		in := t.turn
		if f.InputSeq != 0 {
			in = f.InputSeq
		}
		if in != 0 {
			switch f.Status {
			case "", "completed":
				t.completed[in] = "completed"
			case "failed":
				why := f.Error
				if why == "" {
					why = strings.TrimPrefix(ev.GetText(), "failed: ")
				}
				t.completed[in] = "failed: " + why
			default:
				t.completed[in] = f.Status
			}
		}
		t.turn, t.approval, t.approvalTurn, t.answered = 0, 0, 0, false
	case journal.KindResetBoundary:
		// A context reset drops the queued inputs and the pending approval.
		for _, in := range t.queue {
			t.completed[in] = "cleared by a context reset before its turn"
		}
		t.queue = nil
		t.approval, t.approvalTurn, t.answered = 0, 0, false
	case journal.KindApprovalRequested:
		t.approval, t.approvalTurn, t.answered = ev.GetSeq(), t.turn, false
	case journal.KindApprovalAnswered:
		if f, _ := fact.(journal.ApprovalAnswer); f.ApprovalSeq == t.approval {
			t.answered = true
		}
	case journal.KindToolResult:
		if t.answered {
			t.approval, t.approvalTurn, t.answered = 0, 0, false
		}
	case journal.KindLeaseTaken:
		f, _ := fact.(journal.Lease)
		t.lease.id, t.lease.kind, t.lease.name = f.AttachmentID, f.ClientKind, f.ClientName
	case journal.KindLeaseReleased:
		if f, _ := fact.(journal.Lease); f.AttachmentID == "" || f.AttachmentID == t.lease.id {
			t.lease.id, t.lease.kind, t.lease.name = "", "", ""
		}
	case journal.KindSessionStopped:
		f, _ := fact.(journal.Stop)
		t.stopped, t.stopReason = true, ev.GetText()
		t.child, t.childSource = f.Child, f.Source
	}
}

// answerable reports whether an approval awaits an answer.
func (t *tracker) answerable() bool { return t.approval != 0 && !t.answered }

func (t *tracker) holderName() string {
	if t.lease.id == "" {
		return "nobody"
	}
	if n := joinNonEmpty(" ", t.lease.kind, t.lease.name); n != "" {
		return n
	}
	return t.lease.id
}
