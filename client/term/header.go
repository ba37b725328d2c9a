package term

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/client/journal"
)

// header renders the descriptor: what the session is, where it runs, who
// is attached and who holds the input lease.
func header(d *fakv1.DescribeSessionResponse, now time.Time) string {
	s := d.GetSession()
	var b strings.Builder
	state := strings.ToLower(strings.TrimPrefix(s.GetState().String(), "SESSION_STATE_"))
	if s.GetState() == fakv1.SessionState_SESSION_STATE_STOPPED && s.GetStopReason() != "" {
		state += " (" + singleLine(s.GetStopReason()) + ")"
	}
	title := s.GetTitle()
	if title == "" {
		title = "(untitled)"
	}
	fmt.Fprintf(&b, "session %s: %s [%s]\n", s.GetSessionId(), singleLine(title), state)
	if o := s.GetObjective(); o != "" {
		fmt.Fprintf(&b, "  objective: %s\n", singleLine(o))
	}
	placement := "(no placement)"
	if p := s.GetPlacement(); p != nil {
		placement = journal.FormatPlacement(p)
	}
	fmt.Fprintf(&b, "  epoch %d: %s\n", s.GetEpoch(), placement)
	fmt.Fprintf(&b, "  head #%d, %d turns completed\n", s.GetHeadSeq(), s.GetTurnsCompleted())
	if p := s.GetParentSession(); p != "" {
		how := joinNonEmpty(" ", s.GetBoundarySource(), "of")
		if s.GetBoundarySource() == "" || s.GetBoundarySource() == "fork" {
			how = "forked from"
		}
		line := how + " " + p
		if s.GetForkAddress() != 0 {
			line += fmt.Sprintf(" at #%d", s.GetForkAddress())
		}
		fmt.Fprintf(&b, "  lineage: %s\n", line)
	}
	if p := s.GetProvider(); p != "" {
		fmt.Fprintf(&b, "  provider: %s\n", joinNonEmpty(" ", p, "session", s.GetProviderSessionId()))
	}
	if m := s.GetMove(); m != nil && !moveStateEnded(m.GetState()) {
		to := m.GetTarget().GetNode()
		if to == "" {
			to = "the least loaded admitted node"
		}
		fmt.Fprintf(&b, "  move in progress: %s → %s (%s, %s)\n", m.GetSourceNode(), to, m.GetState(), m.GetMoveId())
	}
	if r := s.GetResetSeq(); r != 0 {
		fmt.Fprintf(&b, "  context reset at #%d\n", r)
	}
	if c := s.GetContextCap(); c != 0 {
		fmt.Fprintf(&b, "  context: %d of %d tokens used\n", s.GetContextUsed(), c)
	}
	if line := budgetLine(d.GetBudget()); line != "" {
		fmt.Fprintf(&b, "  budget: %s\n", line)
	}
	if p := s.GetPending(); p != nil {
		var parts []string
		if p.GetTurnInputSeq() != 0 {
			parts = append(parts, fmt.Sprintf("turn running for input #%d", p.GetTurnInputSeq()))
		}
		if len(p.GetQueuedInputs()) > 0 {
			parts = append(parts, "queued inputs "+formatSeqs(p.GetQueuedInputs()))
		}
		if p.GetApprovalSeq() != 0 {
			parts = append(parts, fmt.Sprintf("approval #%d pending", p.GetApprovalSeq()))
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "  pending: %s\n", strings.Join(parts, "; "))
		}
	}
	if l := s.GetLease(); l != nil && l.GetAttachmentId() != "" && l.GetExpiresUnixNano() > now.UnixNano() {
		fmt.Fprintf(&b, "  lease: held by %s (%s)\n", joinNonEmpty(" ", l.GetClientKind(), l.GetClientName()), l.GetAttachmentId())
	} else {
		b.WriteString("  lease: free\n")
	}
	if len(d.GetAttachments()) == 0 {
		b.WriteString("  attachments: none\n")
	} else {
		b.WriteString("  attachments:\n")
		for _, a := range d.GetAttachments() {
			var notes []string
			if a.GetNode() != "" {
				notes = append(notes, "via "+a.GetNode())
			}
			if a.GetPresent() {
				notes = append(notes, "present")
			} else {
				notes = append(notes, "away")
			}
			if a.GetHoldsLease() {
				notes = append(notes, "holds the lease")
			}
			fmt.Fprintf(&b, "    %s %s (%s)\n", joinNonEmpty(" ", a.GetClientKind(), a.GetClientName()), a.GetAttachmentId(), strings.Join(notes, ", "))
		}
	}
	return b.String()
}

// moveStateEnded reports whether a move state is terminal.
func moveStateEnded(state string) bool {
	return state == "CUTOVER_COMMITTED" || state == "MOVE_FAILED" || state == "MOVE_UNSAFE"
}

// budgetLine summarizes a budget envelope: used/limit on every limited
// axis, used alone on unlimited axes that were used; "" when nothing is
// limited or used.
func budgetLine(e *fakv1.Envelope) string {
	if e == nil {
		return ""
	}
	lim, used := e.GetLimits(), e.GetUsed()
	count := func(n uint64) string { return strconv.FormatUint(n, 10) }
	axes := []struct {
		name        string
		limit, used uint64
		format      func(uint64) string
	}{
		{"turns", lim.GetTurns(), used.GetTurns(), count},
		{"output tokens", lim.GetOutputTokens(), used.GetOutputTokens(), count},
		{"queries", lim.GetQueries(), used.GetQueries(), count},
		{"tool calls", lim.GetToolCalls(), used.GetToolCalls(), count},
		{"spend", lim.GetSpendMicros(), used.GetSpendMicros(), journal.FormatSpend},
	}
	var parts []string
	for _, a := range axes {
		switch {
		case a.limit != 0:
			parts = append(parts, fmt.Sprintf("%s %s/%s", a.name, a.format(a.used), a.format(a.limit)))
		case a.used != 0:
			parts = append(parts, fmt.Sprintf("%s %s", a.name, a.format(a.used)))
		}
	}
	if n := e.GetRefusals(); n != 0 {
		parts = append(parts, fmt.Sprintf("%d refused", n))
	}
	if len(parts) > 0 && e.GetSessions() > 1 {
		parts = append(parts, fmt.Sprintf("shared by %d sessions", e.GetSessions()))
	}
	return strings.Join(parts, ", ")
}

func formatSeqs(seqs []uint64) string {
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = "#" + strconv.FormatUint(s, 10)
	}
	return strings.Join(parts, " ")
}
