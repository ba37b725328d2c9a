package journal

import (
	"fmt"
	"strings"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// Client names the client of an attachment in a fact.
type Client struct {
	AttachmentID string
	Kind, Name   string
}

// String is "browser alice", the kind alone when the client gave no name,
// the attachment id when it gave neither.
func (c Client) String() string {
	if s := joinNonEmpty(" ", c.Kind, c.Name); s != "" {
		return s
	}
	return c.AttachmentID
}

// Style adapts Summary to a client's view. The zero Style is Summary's.
type Style struct {
	// Name names a client in a summary: who joined or left, holds or
	// released the lease, typed an input, answered an approval. nil (or an
	// empty result) is Client.String. The terminal client names itself
	// "you" this way.
	Name func(Client) string
}

func (st Style) name(c Client) string {
	if st.Name != nil {
		if s := st.Name(c); s != "" {
			return s
		}
	}
	return c.String()
}

// Summary says what an event means, in the words every client prints for
// it (fakctl session log, the terminal client): fak's own events from
// their facts (who attached, who holds the lease, which epoch runs where,
// what a move did), runner events as the turn's steps, anything else as its
// kind, its text and the top-level fields of its data. An event whose facts
// cannot be read falls back to the same form. Multi-line texts are kept:
// laying them out is the caller's.
func Summary(ev *fakv1.Event) string { return Style{}.Summary(ev) }

// Summary is Summary with st's names.
func (st Style) Summary(ev *fakv1.Event) string {
	kind, text := ev.GetKind(), ev.GetText()
	switch kind {
	case KindSessionCreated:
		return withText("session created", text)
	case KindOutput:
		return "agent> " + text
	case KindToolResult:
		return withText("tool result", text)
	case KindApprovalRequested:
		return withText("approval requested", text)
	}
	f, err := Decode(ev)
	if err != nil && err != ErrNoData {
		return generic(ev)
	}
	switch f := f.(type) {
	case Stop:
		s := withText("session stopped", text)
		if f.Child != "" {
			s += "; continues as " + f.Child + paren(f.Source)
		}
		return s
	case Input:
		who := "input"
		if err == nil {
			who = st.name(Client{f.AttachmentID, f.ClientKind, f.ClientName})
		}
		return who + "> " + text
	case Turn:
		return st.turnSummary(kind, text, f)
	case Tool:
		if f.Tool != "" {
			args := formatArgs(f.Args)
			if args == "" {
				args = text
			}
			return "tool call: " + joinNonEmpty(" ", f.Tool, args)
		}
		return withText("tool call", text)
	}
	if err != nil {
		return generic(ev)
	}
	if s := st.factSummary(kind, f); s != "" {
		return s
	}
	return generic(ev)
}

// factSummary words fak's own events from their facts; "" when the facts
// are not enough to say it.
func (st Style) factSummary(kind string, fact Fact) string {
	switch f := fact.(type) {
	case EpochChange:
		if f.Placement == nil {
			return ""
		}
		s := fmt.Sprintf("epoch %d: %s", f.Epoch, FormatPlacement(f.Placement.API()))
		switch {
		case f.Reason == "fresh":
			s += fmt.Sprintf(" (fresh: provider session %s, %s pruned)", f.ProviderSessionID, Plural(uint64(f.Pruned), "cached provider entry"))
		case f.Reason != "" && f.ProviderSessionID != "":
			s += " (" + f.Reason + ": provider session " + f.ProviderSessionID + ")"
		default:
			s += paren(f.Reason)
		}
		return s
	case Attachment:
		who := st.name(Client{f.AttachmentID, f.ClientKind, f.ClientName})
		if kind == KindAttachmentJoined {
			s := who + " joined"
			if f.Node != "" {
				s += " via " + f.Node
			}
			return s
		}
		return who + " left" + paren(f.Reason)
	case Lease:
		who := st.name(Client{f.AttachmentID, f.ClientKind, f.ClientName})
		if kind == KindLeaseReleased {
			return "lease released by " + who + paren(f.Reason)
		}
		s := "lease taken by " + who
		if f.StolenFrom != "" {
			s += " (stolen from " + st.name(Client{AttachmentID: f.StolenFrom, Name: strings.TrimSpace(f.StolenFromName)}) + ")"
		}
		return s
	case ApprovalAnswer:
		if f.ApprovalSeq == 0 {
			return ""
		}
		verdict := "denied"
		if f.Approved {
			verdict = "approved"
		}
		s := fmt.Sprintf("approval #%d %s by %s", f.ApprovalSeq, verdict, st.name(Client{f.AttachmentID, f.ClientKind, f.ClientName}))
		if f.Note != "" {
			s += ": " + f.Note
		}
		return s
	case Reset:
		return resetSummary(f)
	case ProviderBoundary:
		if f.PreviousSession == "" {
			return ""
		}
		s := joinNonEmpty(" ", f.Source, "of", f.PreviousSession)
		if f.NewProviderSessionID != "" {
			s += " (" + joinNonEmpty(" ", f.Provider, "provider session", f.NewProviderSessionID) + ")"
		}
		return s
	case Provider:
		return providerSummary(kind, f)
	case Charge:
		if kind == KindBudgetExhausted {
			return "budget exhausted: " + axisName(f.Exhausted) + "; refused " + formatCharge(f)
		}
		return "charged " + formatCharge(f)
	case Fork:
		if f.SourceSession == "" {
			return ""
		}
		return fmt.Sprintf("forked from %s at #%d (%s copied)", f.SourceSession, f.ForkAddress, Plural(uint64(f.CopiedEvents), "event"))
	case Stranded:
		s := "stranded"
		if !f.Stranded {
			s = "no longer stranded"
		}
		if f.Reason != "" {
			s += ": " + f.Reason
		}
		return s + paren(f.Node)
	case Move:
		if f.MoveID == "" {
			return ""
		}
		return moveSummary(kind, f)
	}
	return ""
}

// turnSummary words turn.started ("turn started for input #6 (echo on
// n1)") and turn.completed ("turn completed", "turn failed: why",
// "turn refused", "turn of input #6 interrupted by terminal alice").
func (st Style) turnSummary(kind, text string, f Turn) string {
	if kind == KindTurnStarted {
		s := "turn started"
		if f.InputSeq != 0 {
			s += fmt.Sprintf(" for input #%d", f.InputSeq)
		}
		return s + paren(singleLine(text))
	}
	switch f.Status {
	case "", "completed":
		if text == "completed" {
			text = ""
		}
		return "turn completed" + paren(singleLine(text))
	case "failed":
		if f.Error != "" {
			return "turn failed: " + f.Error
		}
		return "turn failed"
	case StatusInterrupted:
		s := "turn interrupted"
		if f.InputSeq != 0 {
			s = fmt.Sprintf("turn of input #%d interrupted", f.InputSeq)
		}
		if by := st.interrupter(f.By); by != "" {
			s += " by " + by
		}
		return s
	}
	return "turn " + f.Status
}

// interrupter names who interrupted a turn: a client, "move mov_1",
// "launch lch_1"; "" when the fact names nobody (a runner closing a turn
// its predecessor left open).
func (st Style) interrupter(by *TurnBy) string {
	switch {
	case by == nil:
		return ""
	case by.Move != "":
		return "move " + by.Move
	case by.Launch != "":
		return "launch " + by.Launch
	case by.AttachmentID != "" || by.ClientKind != "":
		return st.name(Client{by.AttachmentID, by.ClientKind, by.ClientName})
	}
	return ""
}

// providerSummary words the provider hooks: "claude session abc bound
// (startup, launch l1)", "… ended (clear, launch l1)", "compaction by
// codex session t1 (launch l1)". A client's compaction annotation (no
// provider) is "".
func providerSummary(kind string, f Provider) string {
	if f.Provider == "" && f.ProviderSessionID == "" {
		return ""
	}
	who := joinNonEmpty(" ", f.Provider, "session", f.ProviderSessionID)
	launch := ""
	if f.Launch != "" {
		launch = "launch " + f.Launch
	}
	switch kind {
	case KindProviderBound:
		return who + " bound" + paren(joinNonEmpty(", ", f.Source, launch))
	case KindProviderEnd:
		return who + " ended" + paren(joinNonEmpty(", ", f.Reason, launch))
	}
	if f.Provider == "" {
		return ""
	}
	return "compaction by " + who + paren(launch)
}

// resetSummary words a reset boundary: what it cleared, the provider
// session it rotated to and the context axis re-armed.
func resetSummary(f Reset) string {
	var cleared []string
	if len(f.ClearedInputs) > 0 {
		cleared = append(cleared, "queued inputs "+formatSeqs(f.ClearedInputs))
	}
	if f.ClearedTurn != 0 {
		cleared = append(cleared, fmt.Sprintf("the turn of input #%d", f.ClearedTurn))
	}
	if f.ClearedApproval != 0 {
		cleared = append(cleared, fmt.Sprintf("approval #%d", f.ClearedApproval))
	}
	s := "context reset: the agent's context starts after this point"
	if len(cleared) > 0 {
		s += "; cleared " + strings.Join(cleared, ", ")
	}
	if f.ProviderSessionID != "" {
		s += "; provider session " + f.ProviderSessionID
	}
	if f.ContextRearmedTo != 0 {
		s += fmt.Sprintf("; context re-armed to %d tokens", f.ContextRearmedTo)
	}
	return s
}

// moveSummary words one transition of a move: where it goes, what each
// step fixed, and how long after the request it committed.
func moveSummary(kind string, f Move) string {
	after := ""
	if f.ElapsedNanos > 0 {
		after = fmt.Sprintf(" (+%dms)", time.Duration(f.ElapsedNanos).Milliseconds())
	}
	switch kind {
	case KindMoveRequested:
		to := f.To
		if to == "" {
			to = "the least loaded admitted node"
		}
		return fmt.Sprintf("move %s requested: %s → %s%s; the session runs on %s until the cutover", f.MoveID, f.From, to, paren(f.Cause), f.From)
	case KindMoveCheckpointed:
		s := fmt.Sprintf("move: checkpointed at #%d", f.CheckpointSeq)
		if w := f.Workspace; w != nil && w.Bytes > 0 {
			s += fmt.Sprintf(", workspace %s in %d chunks (snapshot %s)", FormatBytes(w.Bytes), w.Chunks, fmtDuration(w.SnapshotNanos))
		}
		return s + after
	case KindMoveAdmitted:
		s := "move: " + f.To + " admitted"
		if len(f.Checks) > 0 {
			s += " (" + strings.Join(f.Checks, ", ") + ")"
		}
		if len(f.Degradation) > 0 {
			s += "; degradation: " + strings.Join(f.Degradation, "; ")
		}
		return s + after
	case KindMoveRestored:
		s := fmt.Sprintf("move: restored on %s as epoch %d", f.To, f.NewEpoch)
		if t := f.Transfer; t != nil && t.BytesSent+t.BytesPresent > 0 {
			s += "; " + TransferText(t)
		}
		if c := f.Cache; c != nil {
			s += "; " + CacheText(c)
		}
		return s + after
	case KindMoveWarmed:
		s := fmt.Sprintf("move warm-up: the first turn after the move (input #%d) took %s", f.InputSeq, fmtDuration(f.WarmupNanos))
		if c := f.Cache; c != nil {
			s += "; " + CacheText(c)
		}
		return s
	case KindMoveCutover:
		return fmt.Sprintf("move committed: %s → %s, epoch %d%s", f.From, f.To, f.NewEpoch, after)
	}
	what := "move failed"
	if kind == KindMoveUnsafe {
		what = "move unsafe (no safe point)"
	}
	if f.Phase != "" {
		what += " in " + f.Phase
	}
	if f.Reason != "" {
		what += ": " + singleLine(f.Reason)
	}
	if f.From != "" {
		what += "; the session stays on " + f.From
	}
	return what + after
}

// generic is the summary of an event without words of its own (a note, a
// checkpoint, a kind this client does not know, facts that cannot be
// read): its kind, its text, and the top-level fields of its data.
func generic(ev *fakv1.Event) string {
	s := withText(ev.GetKind(), ev.GetText())
	if d := dataFields(ev.GetData()); d != "" {
		s += " " + d
	}
	return s
}

// withText is "what: text", or what alone without a text.
func withText(what, text string) string {
	if text == "" {
		return what
	}
	return what + ": " + text
}

// paren is " (s)", or "" for an empty s.
func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// TransferText says what restoring a workspace cost: what crossed, what
// the destination already held, how long it took.
// CacheText words a move's cache lineage: "cache can be warm (thread T
// resumes)", "cold cache: model "a" → "b"", "no provider cache to keep".
func CacheText(c *Cache) string {
	switch c.Cache {
	case "warm":
		if c.ProviderThread != "" {
			return "cache can be warm (thread " + c.ProviderThread + " resumes)"
		}
		return "cache can be warm"
	case "cold":
		return "cold cache: " + c.Why
	}
	return "no provider cache to keep"
}

func TransferText(t *Transfer) string {
	return fmt.Sprintf("workspace: %s sent in %d chunks (%s), %s already there in %d, restored in %s",
		FormatBytes(t.BytesSent), t.ChunksSent, fmtDuration(t.FetchNanos), FormatBytes(t.BytesPresent), t.ChunksPresent, fmtDuration(t.RestoreNanos))
}

// FormatBytes is n in B, kB, MB or GB (powers of 1000, as disks count).
func FormatBytes(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

func fmtDuration(nanos int64) string {
	d := time.Duration(nanos)
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return d.Round(10 * time.Millisecond).String()
}
