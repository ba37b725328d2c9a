package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// Event kinds of the journal (fsm/kinds.go), as the terminal client renders
// them.
const (
	evSessionCreated    = "session.created"
	evSessionStopped    = "session.stopped"
	evEpochChanged      = "epoch.changed"
	evAttachmentJoined  = "attachment.joined"
	evAttachmentLeft    = "attachment.left"
	evLeaseTaken        = "lease.taken"
	evLeaseReleased     = "lease.released"
	evInput             = "input"
	evTurnStarted       = "turn.started"
	evOutput            = "output"
	evTurnCompleted     = "turn.completed"
	evToolCall          = "tool.call"
	evToolResult        = "tool.result"
	evApprovalRequested = "approval.requested"
	evApprovalAnswered  = "approval.answered"
	evNote              = "note"
	// The reset ledger, provider hooks and budgets (DESIGN.md §5).
	evResetBoundary    = "reset_boundary"
	evProviderBoundary = "fak.session.provider_boundary.v1"
	evProviderBound    = "provider.bound"
	evProviderEnd      = "provider.session_end"
	evCompaction       = "compaction"
	evBudgetCharged    = "budget.charged"
	evBudgetExhausted  = "budget.exhausted"
	evSessionForked    = "session.forked"
	// Moves (DESIGN.md §8): one event per transition.
	evMoveRequested    = "move.requested"
	evMoveCheckpointed = "move.checkpointed"
	evMoveAdmitted     = "move.admitted"
	evMoveRestored     = "move.restored"
	evMoveCutover      = "move.cutover"
	evMoveFailed       = "move.failed"
	evMoveUnsafe       = "move.unsafe"
)

// noticePrefix starts every line the client prints on its own account (not
// an event), so a transcript tells the journal from the client's remarks.
const noticePrefix = "-- "

// eventFacts is the union of the structured payloads (JSON in Event.data)
// the client reads: the facts fsm writes for its own events and what
// runners write for turns and tools. Absent fields stay zero.
type eventFacts struct {
	AttachmentID   string          `json:"attachment_id"`
	ClientKind     string          `json:"client_kind"`
	ClientName     string          `json:"client_name"`
	Node           string          `json:"node"`
	Reason         string          `json:"reason"`
	StolenFrom     string          `json:"stolen_from"`
	StolenFromName string          `json:"stolen_from_name"`
	Epoch          uint64          `json:"epoch"`
	Placement      *placementFacts `json:"placement"`
	ApprovalSeq    uint64          `json:"approval_seq"`
	Approved       bool            `json:"approved"`
	Note           string          `json:"note"`
	InputSeq       uint64          `json:"input_seq"`
	Status         string          `json:"status"`
	Error          string          `json:"error"`
	Tool           string          `json:"tool"`
	Args           json.RawMessage `json:"args"`
	ClearedInputs  []uint64        `json:"cleared_inputs"`
	// Ledger, provider and budget facts (fsm: epochChangeFact, resetFact,
	// boundaryFact, providerFact, chargeFact, forkFact, and the stop of a
	// cleared session, which names its child).
	ClearedTurn          uint64       `json:"cleared_turn"`
	ClearedApproval      uint64       `json:"cleared_approval"`
	ProviderSessionID    string       `json:"provider_session_id"`
	Pruned               uint32       `json:"pruned"`
	Provider             string       `json:"provider"`
	Source               string       `json:"source"`
	PreviousSession      string       `json:"previous_session"`
	NewProviderSessionID string       `json:"new_provider_session_id"`
	Usage                *budgetFacts `json:"usage"`
	ContextTokens        uint64       `json:"context_tokens"`
	Exhausted            string       `json:"exhausted"`
	ViaLaunch            string       `json:"via_launch"`
	SourceSession        string       `json:"source_session"`
	ForkAddress          uint64       `json:"fork_address"`
	CopiedEvents         int          `json:"copied_events"`
	Child                string       `json:"child"`
	// Move facts (fsm: moveFact).
	MoveID        string   `json:"move_id"`
	State         string   `json:"state"`
	Cause         string   `json:"cause"`
	From          string   `json:"from"`
	To            string   `json:"to"`
	SourceEpoch   uint64   `json:"source_epoch"`
	CheckpointSeq uint64   `json:"checkpoint_seq"`
	NewEpoch      uint64   `json:"new_epoch"`
	Checks        []string `json:"checks"`
	Degradation   []string `json:"degradation"`
	Phase         string   `json:"phase"`
	ElapsedNanos  int64    `json:"elapsed_nanos"`
}

// budgetFacts is one charge (fsm: budgetFact).
type budgetFacts struct {
	Turns        uint64 `json:"turns"`
	OutputTokens uint64 `json:"output_tokens"`
	Queries      uint64 `json:"queries"`
	SpendMicros  uint64 `json:"spend_micros"`
	ToolCalls    uint64 `json:"tool_calls"`
}

type placementFacts struct {
	RuntimeAdapter string `json:"runtime_adapter"`
	Provider       string `json:"provider"`
	AccountRef     string `json:"account_ref"`
	Model          string `json:"model"`
	Node           string `json:"node"`
}

// factsOf decodes an event's data; ok is false when there is none or it is
// not a JSON object.
func factsOf(ev *fakv1.Event) (f eventFacts, ok bool) {
	if len(ev.GetData()) == 0 {
		return f, false
	}
	return f, json.Unmarshal(ev.GetData(), &f) == nil
}

// renderer turns events into transcript lines. It is a small state machine:
// the chunks of an agent's reply are printed as they arrive on one line that
// starts with the address of the first chunk, and any other line (event or
// notice) first ends the open reply.
type renderer struct {
	// selfKind is the client kind this client attached as; self holds its
	// attachment ids (more than one after it had to attach again).
	selfKind string
	self     map[string]bool
	// inReply: the last thing printed was an output chunk, so the next chunk
	// continues it. open: the last line printed has no newline yet.
	inReply bool
	open    bool
}

func newRenderer(selfKind string) *renderer {
	return &renderer{selfKind: selfKind, self: make(map[string]bool)}
}

// addSelf marks an attachment id as this client's own.
func (r *renderer) addSelf(attachmentID string) { r.self[attachmentID] = true }

// who names a client for lease and presence lines: "browser alice", or
// "terminal you" for this client.
func (r *renderer) who(attachmentID, kind, name string) string {
	if attachmentID != "" && r.self[attachmentID] {
		if kind == "" {
			kind = r.selfKind
		}
		return kind + " you"
	}
	return joinNonEmpty(" ", kind, name)
}

// speaker names the author of an input: "you" for this client, else
// "browser alice".
func (r *renderer) speaker(f eventFacts) string {
	if f.AttachmentID != "" && r.self[f.AttachmentID] {
		return "you"
	}
	if s := joinNonEmpty(" ", f.ClientKind, f.ClientName); s != "" {
		return s
	}
	return "input"
}

// breakLine ends an open reply line, if any.
func (r *renderer) breakLine() string {
	r.inReply = false
	if r.open {
		r.open = false
		return "\n"
	}
	return ""
}

// notice renders a remark of the client as one line.
func (r *renderer) notice(msg string) string {
	return r.breakLine() + noticePrefix + singleLine(msg) + "\n"
}

// render returns the text for one event: its lines, each starting with the
// event's address, except continued output chunks.
func (r *renderer) render(ev *fakv1.Event) string {
	if ev.GetKind() == evOutput {
		return r.renderOutput(ev)
	}
	prefix := r.breakLine()
	return prefix + r.line(ev) + "\n"
}

func (r *renderer) renderOutput(ev *fakv1.Event) string {
	text := ev.GetText()
	var b strings.Builder
	if !r.inReply {
		b.WriteString(r.breakLine())
		fmt.Fprintf(&b, "#%d agent> ", ev.GetSeq())
		r.inReply = true
		r.open = true
	}
	if text == "" {
		return b.String()
	}
	b.WriteString(text)
	r.open = !strings.HasSuffix(text, "\n")
	return b.String()
}

// line renders every event but output; multi-line texts continue on
// indented lines.
func (r *renderer) line(ev *fakv1.Event) string {
	addr := "#" + strconv.FormatUint(ev.GetSeq(), 10) + " "
	text := ev.GetText()
	f, ok := factsOf(ev)
	switch ev.GetKind() {
	case evSessionCreated:
		if text == "" {
			return addr + "session created"
		}
		return addr + "session created: " + indentRest(text)
	case evSessionStopped:
		s := addr + "session stopped"
		if text != "" {
			s += ": " + indentRest(text)
		}
		if ok && f.Child != "" {
			s += "; continues as " + f.Child
			if f.Source != "" {
				s += " (" + f.Source + ")"
			}
		}
		return s
	case evEpochChanged:
		if ok && f.Placement != nil {
			s := addr + fmt.Sprintf("epoch %d: %s", f.Epoch, formatPlacement(f.Placement))
			switch {
			case f.Reason == "fresh":
				s += fmt.Sprintf(" (fresh: provider session %s, %s pruned)", f.ProviderSessionID, plural(uint64(f.Pruned), "cached provider entry"))
			case f.Reason != "" && f.ProviderSessionID != "":
				s += " (" + f.Reason + ": provider session " + f.ProviderSessionID + ")"
			case f.Reason != "":
				s += " (" + f.Reason + ")"
			}
			return s
		}
	case evResetBoundary:
		if ok {
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
			s := addr + "context reset: the agent's context starts after this point"
			if len(cleared) > 0 {
				s += "; cleared " + strings.Join(cleared, ", ")
			}
			return s
		}
	case evProviderBoundary:
		if ok && f.PreviousSession != "" {
			s := addr + joinNonEmpty(" ", f.Source, "of", f.PreviousSession)
			if f.NewProviderSessionID != "" {
				s += " (" + joinNonEmpty(" ", f.Provider, "provider session", f.NewProviderSessionID) + ")"
			}
			return s
		}
	case evProviderBound:
		if ok && (f.Provider != "" || f.ProviderSessionID != "") {
			s := addr + joinNonEmpty(" ", f.Provider, "session", f.ProviderSessionID) + " bound"
			if f.Source != "" {
				s += " (" + f.Source + ")"
			}
			return s
		}
	case evProviderEnd:
		if ok && (f.Provider != "" || f.ProviderSessionID != "") {
			s := addr + joinNonEmpty(" ", f.Provider, "session", f.ProviderSessionID) + " ended"
			if f.Reason != "" {
				s += " (" + f.Reason + ")"
			}
			return s
		}
	case evCompaction:
		if ok && f.Provider != "" {
			return addr + "compaction by " + joinNonEmpty(" ", f.Provider, "session", f.ProviderSessionID)
		}
	case evBudgetCharged:
		if ok {
			return addr + "charged " + formatCharge(f)
		}
	case evBudgetExhausted:
		if ok {
			return addr + "budget exhausted: " + axisName(f.Exhausted) + "; refused " + formatCharge(f)
		}
	case evSessionForked:
		if ok && f.SourceSession != "" {
			return addr + fmt.Sprintf("forked from %s at #%d (%s copied)", f.SourceSession, f.ForkAddress, plural(uint64(f.CopiedEvents), "event"))
		}
	case evMoveRequested, evMoveCheckpointed, evMoveAdmitted, evMoveRestored, evMoveCutover, evMoveFailed, evMoveUnsafe:
		if ok && f.MoveID != "" {
			return addr + moveLine(ev.GetKind(), f)
		}
	case evAttachmentJoined:
		if ok {
			s := addr + r.who(f.AttachmentID, f.ClientKind, f.ClientName) + " joined"
			if f.Node != "" {
				s += " via " + f.Node
			}
			return s
		}
	case evAttachmentLeft:
		if ok {
			s := addr + r.who(f.AttachmentID, f.ClientKind, f.ClientName) + " left"
			if f.Reason != "" {
				s += " (" + f.Reason + ")"
			}
			return s
		}
	case evLeaseTaken:
		if ok {
			s := addr + "lease taken by " + r.who(f.AttachmentID, f.ClientKind, f.ClientName)
			if f.StolenFrom != "" {
				from := f.StolenFromName
				if r.self[f.StolenFrom] {
					from = r.who(f.StolenFrom, "", "")
				}
				if from == "" {
					from = f.StolenFrom
				}
				s += " (stolen from " + from + ")"
			}
			return s
		}
	case evLeaseReleased:
		if ok {
			s := addr + "lease released by " + r.who(f.AttachmentID, f.ClientKind, f.ClientName)
			if f.Reason != "" {
				s += " (" + f.Reason + ")"
			}
			return s
		}
	case evInput:
		return addr + r.speaker(f) + "> " + indentRest(text)
	case evTurnStarted:
		s := addr + "turn started"
		if ok && f.InputSeq != 0 {
			s += fmt.Sprintf(" for input #%d", f.InputSeq)
		}
		if text != "" {
			s += " (" + singleLine(text) + ")"
		}
		return s
	case evTurnCompleted:
		switch f.Status {
		case "", "completed":
			if text == "" || text == "completed" {
				return addr + "turn completed"
			}
			return addr + "turn completed (" + singleLine(text) + ")"
		case "failed":
			if f.Error != "" {
				return addr + "turn failed: " + indentRest(f.Error)
			}
			return addr + "turn failed"
		}
		return addr + "turn " + f.Status
	case evToolCall:
		if ok && f.Tool != "" {
			return addr + "tool call: " + indentRest(joinNonEmpty(" ", f.Tool, formatArgs(f.Args)))
		}
		return addr + "tool call: " + indentRest(text)
	case evApprovalRequested:
		if text == "" {
			text = "approve?"
		}
		return addr + "approval requested: " + indentRest(text) + " [y/n]"
	case evApprovalAnswered:
		if ok && f.ApprovalSeq != 0 {
			verdict := "denied"
			if f.Approved {
				verdict = "approved"
			}
			s := addr + fmt.Sprintf("approval #%d %s by %s", f.ApprovalSeq, verdict, r.who(f.AttachmentID, f.ClientKind, f.ClientName))
			if f.Note != "" {
				s += ": " + indentRest(f.Note)
			}
			return s
		}
	case evToolResult:
		return addr + "tool result: " + indentRest(text)
	case evNote:
		return addr + "note: " + indentRest(text)
	}
	if text == "" {
		return addr + ev.GetKind()
	}
	return addr + ev.GetKind() + ": " + indentRest(text)
}

// moveLine words one transition of a move: where it goes, what each step
// fixed, and how long after the request it committed.
func moveLine(kind string, f eventFacts) string {
	after := ""
	if f.ElapsedNanos > 0 {
		after = fmt.Sprintf(" (+%dms)", time.Duration(f.ElapsedNanos).Milliseconds())
	}
	switch kind {
	case evMoveRequested:
		to := f.To
		if to == "" {
			to = "the least loaded admitted node"
		}
		s := fmt.Sprintf("move requested: %s → %s", f.From, to)
		if f.Cause != "" {
			s += " (" + f.Cause + ")"
		}
		return s + "; the session runs on " + f.From + " until the cutover"
	case evMoveCheckpointed:
		return fmt.Sprintf("move: checkpointed at #%d%s", f.CheckpointSeq, after)
	case evMoveAdmitted:
		s := "move: " + f.To + " admitted"
		if len(f.Checks) > 0 {
			s += " (" + strings.Join(f.Checks, ", ") + ")"
		}
		if len(f.Degradation) > 0 {
			s += "; degradation: " + strings.Join(f.Degradation, "; ")
		}
		return s + after
	case evMoveRestored:
		return fmt.Sprintf("move: restored on %s as epoch %d%s", f.To, f.NewEpoch, after)
	case evMoveCutover:
		return fmt.Sprintf("move committed: %s → %s, epoch %d%s", f.From, f.To, f.NewEpoch, after)
	}
	what := "move failed"
	if kind == evMoveUnsafe {
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

// formatCharge lists what a charge asked for: "1 turn, 100 output tokens,
// spend 0.25; context +500 tokens", or "nothing".
func formatCharge(f eventFacts) string {
	var parts []string
	if b := f.Usage; b != nil {
		for _, p := range []struct {
			n    uint64
			noun string
		}{{b.Turns, "turn"}, {b.OutputTokens, "output token"}, {b.Queries, "query"}, {b.ToolCalls, "tool call"}} {
			if p.n != 0 {
				parts = append(parts, plural(p.n, p.noun))
			}
		}
		if b.SpendMicros != 0 {
			parts = append(parts, "spend "+formatSpend(b.SpendMicros))
		}
	}
	s := strings.Join(parts, ", ")
	if f.ContextTokens != 0 {
		c := fmt.Sprintf("context +%d tokens", f.ContextTokens)
		if s != "" {
			c = "; " + c
		}
		s += c
	}
	if s == "" {
		s = "nothing"
	}
	if f.ViaLaunch != "" {
		s += " (via launch " + f.ViaLaunch + ")"
	}
	return s
}

// axisName turns the FSM's axis names (spend_micros, output_tokens) into
// words.
func axisName(axis string) string {
	switch axis {
	case "spend_micros":
		return "spend"
	case "":
		return "budget"
	}
	return strings.ReplaceAll(axis, "_", " ")
}

// formatSpend renders micros (millionths of the account's currency) as a
// decimal amount without trailing zeros: 950000 is "0.95".
func formatSpend(micros uint64) string {
	whole := strconv.FormatUint(micros/1_000_000, 10)
	if frac := micros % 1_000_000; frac != 0 {
		return whole + "." + strings.TrimRight(fmt.Sprintf("%06d", frac), "0")
	}
	return whole
}

// plural is "1 query", "2 queries", "0 events".
func plural(n uint64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if stem, ok := strings.CutSuffix(noun, "y"); ok && !strings.HasSuffix(stem, "a") && !strings.HasSuffix(stem, "e") && !strings.HasSuffix(stem, "o") {
		return strconv.FormatUint(n, 10) + " " + stem + "ies"
	}
	return strconv.FormatUint(n, 10) + " " + noun + "s"
}

// formatArgs renders a tool call's arguments: a JSON string as itself,
// anything else as compact JSON.
func formatArgs(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		return b.String()
	}
	return string(raw)
}

func formatPlacement(p *placementFacts) string {
	s := p.RuntimeAdapter
	if s == "" {
		s = "(no runtime adapter)"
	}
	if p.Provider != "" {
		s += " " + p.Provider
	}
	if p.Model != "" {
		s += " " + p.Model
	}
	if p.AccountRef != "" {
		s += " (account " + p.AccountRef + ")"
	}
	if p.Node != "" {
		s += " on " + p.Node
	}
	return s
}

// indentRest keeps a multi-line text readable under its address: lines
// after the first are indented, and a trailing newline is dropped.
func indentRest(s string) string {
	s = strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	return strings.ReplaceAll(s, "\n", "\n    ")
}

var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")

func singleLine(s string) string { return lineBreaks.Replace(strings.TrimSpace(s)) }

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

// transcript serializes everything the client prints on stdout: events from
// the watch, notices from the input loop and the keep-alive goroutines.
type transcript struct {
	mu sync.Mutex
	w  io.Writer
	r  *renderer
}

func newTranscript(w io.Writer, selfKind string) *transcript {
	return &transcript{w: w, r: newRenderer(selfKind)}
}

func (t *transcript) event(ev *fakv1.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	io.WriteString(t.w, t.r.render(ev))
}

func (t *transcript) notice(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	io.WriteString(t.w, t.r.notice(fmt.Sprintf(format, args...)))
}

// raw prints text as is (the header), after ending an open reply.
func (t *transcript) raw(text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	io.WriteString(t.w, t.r.breakLine()+text)
}

// finish ends an open reply line before the client exits.
func (t *transcript) finish() { t.raw("") }

func (t *transcript) addSelf(attachmentID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.r.addSelf(attachmentID)
}

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
		placement = formatPlacement(&placementFacts{RuntimeAdapter: p.GetRuntimeAdapter(), Provider: p.GetProvider(),
			AccountRef: p.GetAccountRef(), Model: p.GetModel(), Node: p.GetNode()})
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
		{"spend", lim.GetSpendMicros(), used.GetSpendMicros(), formatSpend},
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

// controls renders the capability set: every control, available or not,
// with the reason and the handoff when it is not.
func controls(cs *fakv1.CapabilitySet, as string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "controls (v%d, %s):\n", cs.GetVersion(), as)
	width := 0
	for _, c := range cs.GetControls() {
		width = max(width, len(c.GetName()))
	}
	for _, c := range cs.GetControls() {
		if c.GetAvailable() {
			fmt.Fprintf(&b, "  %-*s  available\n", width, c.GetName())
			continue
		}
		s := "unavailable"
		if m := c.GetMessage(); m != "" {
			s += ": " + singleLine(m)
		}
		if r := c.GetReason(); r != "" {
			s += " (" + r + ")"
		}
		if h := c.GetHandoff(); h != "" {
			s += "; instead: " + h
		}
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.GetName(), s)
	}
	return b.String()
}

func formatSeqs(seqs []uint64) string {
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = "#" + strconv.FormatUint(s, 10)
	}
	return strings.Join(parts, " ")
}
