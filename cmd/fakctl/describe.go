package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/client/journal"
)

// timeNow is the clock describe and list judge lease expiry and presence
// by; tests replace it.
var timeNow = time.Now

func sessionDescribeCommand(fs *flag.FlagSet) runFunc {
	stale := fs.Bool("stale", false, staleUsage)
	attachment := fs.String("attachment", "", "describe the controls as attachment `ID` sees them (default: as an observer)")
	return func(ctx context.Context, c *cli, args []string) error {
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.sessionClient().DescribeSession(ctx, connect.NewRequest(&fakv1.DescribeSessionRequest{
			SessionId:    args[0],
			Consistency:  readConsistency(*stale),
			AttachmentId: *attachment,
		}))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg)
		}
		return writeDescriptor(c.stdout, resp.Msg, *attachment, timeNow())
	}
}

// writeDescriptor prints the session descriptor: the session's fields, its
// attachments and its capability set, as seen by attachmentID ("" for an
// observer).
func writeDescriptor(w io.Writer, d *fakv1.DescribeSessionResponse, attachmentID string, now time.Time) error {
	if err := writeFields(w, descriptorFields(d, now)); err != nil {
		return err
	}
	if e := d.GetBudget(); e != nil {
		fmt.Fprintln(w)
		if err := writeBudget(w, e); err != nil {
			return err
		}
	}

	attachments := d.GetAttachments()
	fmt.Fprintf(w, "\nAttachments (%d):\n", len(attachments))
	if len(attachments) == 0 {
		fmt.Fprintln(w, "  none")
	} else {
		rows := make([][]string, 0, len(attachments))
		for _, a := range attachments {
			rows = append(rows, []string{
				a.GetAttachmentId(), clientName(a.GetClientKind(), a.GetClientName()), a.GetNode(),
				yesNo(a.GetPresent()), holderMark(a.GetHoldsLease()),
				formatClockOrEmpty(a.GetJoinedUnixNano()), formatClockOrEmpty(a.GetSeenUnixNano()),
				formatClockOrEmpty(a.GetExpiresUnixNano()), strings.Join(a.GetCapabilities(), ","),
			})
		}
		header := []string{"ID", "CLIENT", "NODE", "PRESENT", "LEASE", "JOINED", "SEEN", "EXPIRES", "CAPABILITIES"}
		if err := writeTable(w, header, rows); err != nil {
			return err
		}
	}

	caps := d.GetCapabilities()
	viewer := "an observer (--attachment ID for an attachment's view)"
	if attachmentID != "" {
		viewer = "attachment " + attachmentID
	}
	fmt.Fprintf(w, "\nControls (capability set v%d, as seen by %s):\n", caps.GetVersion(), viewer)
	if len(caps.GetControls()) == 0 {
		_, err := fmt.Fprintln(w, "  none")
		return err
	}
	rows := make([][]string, 0, len(caps.GetControls()))
	for _, ctl := range caps.GetControls() {
		rows = append(rows, []string{
			ctl.GetName(), yesNo(ctl.GetAvailable()), ctl.GetReason(), ctl.GetMessage(), ctl.GetHandoff(),
		})
	}
	return writeTable(w, []string{"CONTROL", "AVAILABLE", "REASON", "MESSAGE", "HANDOFF"}, rows)
}

func descriptorFields(d *fakv1.DescribeSessionResponse, now time.Time) [][2]string {
	s := d.GetSession()
	fields := [][2]string{
		{"ID", s.GetSessionId()},
		{"Title", s.GetTitle()},
		{"Objective", s.GetObjective()},
		{"State", formatSessionState(s.GetState())},
	}
	if s.GetStopReason() != "" {
		fields = append(fields, [2]string{"Stop reason", s.GetStopReason()})
	}
	compute := d.GetComputeNode()
	if compute == "" {
		compute = s.GetPlacement().GetNode()
	}
	if compute == "" && s.GetPlacement().GetRuntimeAdapter() == "external" {
		compute = "none (the agent runs under fak guard, outside the fleet)"
	}
	pending := s.GetPending()
	fields = append(fields,
		[2]string{"Epoch", formatUint(s.GetEpoch())},
		[2]string{"Placement", journal.FormatPlacement(s.GetPlacement())},
		[2]string{"Compute node", compute},
	)
	if m := formatMeteredBy(d.GetMeteredBy()); m != "" {
		fields = append(fields, [2]string{"Metered by", m})
	}
	if stranded := formatStranded(s); stranded != "" {
		fields = append(fields, [2]string{"Stranded", stranded})
	}
	if s.GetRecoverManual() {
		fields = append(fields, [2]string{"Recover", "manual (a dead compute node's recovery marks the session stranded instead of moving it)"})
	}
	fields = append(fields,
		[2]string{"Head", formatHead(s)},
		[2]string{"Turns completed", formatUint(s.GetTurnsCompleted())},
		[2]string{"Queued inputs", formatSeqs(pending.GetQueuedInputs())},
		[2]string{"Running turn", formatSeqRef("on the input at seq ", pending.GetTurnInputSeq())},
		[2]string{"Pending approval", formatSeqRef("awaiting an answer to the request at seq ", pending.GetApprovalSeq())},
		[2]string{"Lease", formatLease(s.GetLease(), now)},
		[2]string{"Context", formatContext(s.GetContextUsed(), s.GetContextCap())},
		[2]string{"Context reset", formatResetSeq(s.GetResetSeq())},
		[2]string{"Provider", formatProvider(s)},
		[2]string{"Lineage", formatLineage(s)},
	)
	if m := s.GetMove(); m != nil {
		fields = append(fields, [2]string{"Move", formatMove(m, s.GetMovesCompleted())})
	}
	if cp := s.GetWorkspaceCopy(); cp != nil {
		fields = append(fields, [2]string{"Workspace copy", formatWorkspaceCopy(cp)})
	}
	return append(fields,
		[2]string{"Created", formatTime(s.GetCreatedUnixNano())},
		[2]string{"Updated", formatTime(s.GetUpdatedUnixNano())},
	)
}

// formatWorkspaceCopy renders the copy a recovery would restore: "on n2
// as of #12 (3 turns), 100.0 MB; 100.0 kB sent, 99.9 MB already there,
// held 45ms after its turn".
func formatWorkspaceCopy(cp *fakv1.WorkspaceCopy) string {
	s := fmt.Sprintf("on %s as of #%d (%s), %s", cp.GetNode(), cp.GetAfterInput(),
		journal.Plural(cp.GetTurnsCompleted(), "turn"), journal.FormatBytes(cp.GetBytes()))
	if t := cp.GetTransfer(); t != nil {
		s += fmt.Sprintf("; %s sent, %s already there", journal.FormatBytes(t.GetBytesSent()), journal.FormatBytes(t.GetBytesPresent()))
	}
	if n := cp.GetCopyNanos(); n > 0 {
		s += ", held " + time.Duration(n).Round(time.Millisecond).String() + " after its turn"
	}
	return s
}

// formatStranded renders a stranded session's mark with what to do about
// it: "yes (compute node n1 is dead; move it by hand: fakctl session move
// ID --to NODE)"; "" when the session is not stranded.
func formatStranded(s *fakv1.Session) string {
	if !s.GetStranded() || s.GetState() != fakv1.SessionState_SESSION_STATE_ACTIVE {
		return ""
	}
	node := s.GetStrandedNode()
	if node == "" {
		node = s.GetPlacement().GetNode()
	}
	return fmt.Sprintf("yes (compute node %s is dead; move it by hand: fakctl session move %s --to NODE)", node, s.GetSessionId())
}

// formatProvider renders the provider binding: "claude, provider session
// abc", or "none bound".
func formatProvider(s *fakv1.Session) string {
	provider := s.GetProvider()
	if provider == "" {
		provider = s.GetPlacement().GetProvider()
	}
	id := s.GetProviderSessionId()
	switch {
	case provider == "" && id == "":
		return "none bound"
	case id == "":
		return provider + ", no provider session bound"
	case provider == "":
		return "provider session " + id
	}
	if s.GetProviderThread() {
		return provider + ", thread " + id + " (the next turn resumes it)"
	}
	return provider + ", provider session " + id
}

func sessionDiscoverCommand(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, args []string) error {
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.sessionClient().DiscoverSession(ctx, connect.NewRequest(&fakv1.DiscoverSessionRequest{
			SessionId: args[0],
		}))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg)
		}
		return writeDiscovery(c.stdout, resp.Msg)
	}
}

// writeDiscovery prints where a session runs and the endpoints that serve
// it, in the order the server ranked them.
func writeDiscovery(w io.Writer, d *fakv1.DiscoverSessionResponse) error {
	err := writeFields(w, [][2]string{
		{"Session", d.GetSessionId()},
		{"Epoch", formatUint(d.GetEpoch())},
		{"Placement", journal.FormatPlacement(d.GetPlacement())},
		{"Compute node", d.GetComputeNode()},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nEndpoints (%d):\n", len(d.GetEndpoints()))
	if len(d.GetEndpoints()) == 0 {
		_, err := fmt.Fprintln(w, "  none")
		return err
	}
	rows := make([][]string, 0, len(d.GetEndpoints()))
	for _, ep := range d.GetEndpoints() {
		rows = append(rows, []string{ep.GetNode(), ep.GetApiAddr(), strings.Join(ep.GetRoles(), ","), ep.GetStatus()})
	}
	return writeTable(w, []string{"NODE", "API_ADDRESS", "ROLES", "STATUS"}, rows)
}

// formatHead renders the journal head as its address, "SESSION@SEQ".
func formatHead(s *fakv1.Session) string {
	return fmt.Sprintf("%d (address %s@%d)", s.GetHeadSeq(), s.GetSessionId(), s.GetHeadSeq())
}

// formatLease renders the input lease: its holder, when it was taken and
// when it expires (by the local clock; the fleet decides by its own).
func formatLease(l *fakv1.Lease, now time.Time) string {
	if l.GetAttachmentId() == "" {
		return "none (free to take)"
	}
	s := clientLabel(l.GetClientKind(), l.GetClientName(), l.GetAttachmentId())
	if l.GetTakenUnixNano() != 0 {
		s += ", taken " + formatClock(l.GetTakenUnixNano())
	}
	expires := l.GetExpiresUnixNano()
	if expires == 0 {
		return s
	}
	left := time.Duration(expires - now.UnixNano()).Round(time.Second)
	if left <= 0 {
		return fmt.Sprintf("%s, expired %s (%s ago; free to take)", s, formatClock(expires), -left)
	}
	return fmt.Sprintf("%s, expires %s (in %s)", s, formatClock(expires), left)
}

// leaseHolder is the holder's "kind name" for a table cell, or "" when
// nobody holds an unexpired lease.
func leaseHolder(l *fakv1.Lease, now int64) string {
	if l.GetAttachmentId() == "" || (l.GetExpiresUnixNano() != 0 && l.GetExpiresUnixNano() <= now) {
		return ""
	}
	if name := clientName(l.GetClientKind(), l.GetClientName()); name != "" {
		return name
	}
	return l.GetAttachmentId()
}

func formatSeqs(seqs []uint64) string {
	if len(seqs) == 0 {
		return "none"
	}
	parts := make([]string, len(seqs))
	for i, seq := range seqs {
		parts[i] = formatUint(seq)
	}
	return "seqs " + strings.Join(parts, ", ")
}

func formatSeqRef(prefix string, seq uint64) string {
	if seq == 0 {
		return "none"
	}
	return prefix + formatUint(seq)
}

func formatClockOrEmpty(unixNano int64) string {
	if unixNano == 0 {
		return ""
	}
	return formatClock(unixNano)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func holderMark(holds bool) string {
	if holds {
		return "holder"
	}
	return ""
}

// clientName is "terminal alice", or just the kind when the client gave no
// name.
func clientName(kind, name string) string {
	return joinNonEmpty(kind, name)
}

// clientLabel is "terminal alice (att_…)".
func clientLabel(kind, name, attachmentID string) string {
	s := clientName(kind, name)
	switch {
	case attachmentID == "":
		return s
	case s == "":
		return attachmentID
	}
	return s + " (" + attachmentID + ")"
}

// formatMeteredBy says what meters a session's model calls (the compute
// node's record of its runtime), "" when nothing does per call.
func formatMeteredBy(m string) string {
	switch m {
	case "gateway":
		return "gateway (the compute node's gateway charges every model call)"
	case "cli":
		return "cli (the provider CLI's own reported cost; the node has no account of its provider)"
	case "runtime":
		return "runtime (the model runtime counts its own calls)"
	}
	return m
}
