package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// Event kinds that fakctl renders from their structured payload (the facts
// fsm writes as JSON in the event's data).
const (
	kindSessionCreated   = "session.created"
	kindSessionStopped   = "session.stopped"
	kindEpochChanged     = "epoch.changed"
	kindAttachmentJoined = "attachment.joined"
	kindAttachmentLeft   = "attachment.left"
	kindLeaseTaken       = "lease.taken"
	kindLeaseReleased    = "lease.released"
	kindInput            = "input"
	kindApprovalAnswered = "approval.answered"
	// The reset ledger, provider hooks and budgets (DESIGN.md §5).
	kindResetBoundary    = "reset_boundary"
	kindProviderBoundary = "fak.session.provider_boundary.v1"
	kindProviderBound    = "provider.bound"
	kindProviderEnd      = "provider.session_end"
	kindCompaction       = "compaction"
	kindBudgetCharged    = "budget.charged"
	kindBudgetExhausted  = "budget.exhausted"
	kindSessionForked    = "session.forked"
	// Moves (DESIGN.md §8): one event per transition of the move state
	// machine, with the move's facts.
	kindMoveRequested    = "move.requested"
	kindMoveCheckpointed = "move.checkpointed"
	kindMoveAdmitted     = "move.admitted"
	kindMoveRestored     = "move.restored"
	kindMoveCutover      = "move.cutover"
	kindMoveFailed       = "move.failed"
	kindMoveUnsafe       = "move.unsafe"
)

// eventTimeLayout is how session log prints times of day.
const eventTimeLayout = "15:04:05.000"

// eventFacts is the union of the facts fak writes in the data of its own
// events (fsm: attachmentFact, leaseFact, inputFact, approvalFact,
// epochFact). Absent fields stay zero.
type eventFacts struct {
	AttachmentID   string          `json:"attachment_id"`
	ClientKind     string          `json:"client_kind"`
	ClientName     string          `json:"client_name"`
	Node           string          `json:"node"`
	Capabilities   []string        `json:"capabilities"`
	Reason         string          `json:"reason"`
	ExpiresUnixNs  int64           `json:"expires_unix_nano"`
	StolenFrom     string          `json:"stolen_from"`
	StolenFromName string          `json:"stolen_from_name"`
	Epoch          uint64          `json:"epoch"`
	Placement      *placementFacts `json:"placement"`
	ApprovalSeq    uint64          `json:"approval_seq"`
	Approved       bool            `json:"approved"`
	Note           string          `json:"note"`
	// Ledger, provider and budget facts (fsm: epochChangeFact, resetFact,
	// boundaryFact, providerFact, chargeFact, forkFact, the stop of a
	// cleared session).
	ProviderSessionID    string       `json:"provider_session_id"`
	Pruned               uint32       `json:"pruned"`
	ClearedInputs        []uint64     `json:"cleared_inputs"`
	ClearedTurn          uint64       `json:"cleared_turn"`
	ClearedApproval      uint64       `json:"cleared_approval"`
	ContextRearmedTo     uint64       `json:"context_rearmed_to"`
	Provider             string       `json:"provider"`
	Source               string       `json:"source"`
	PreviousSession      string       `json:"previous_session"`
	NewProviderSessionID string       `json:"new_provider_session_id"`
	Launch               string       `json:"launch"`
	Usage                *budgetFacts `json:"usage"`
	ContextTokens        uint64       `json:"context_tokens"`
	Envelope             string       `json:"envelope"`
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
	Digest        string   `json:"digest"`
	NewEpoch      uint64   `json:"new_epoch"`
	Checks        []string `json:"checks"`
	Degradation   []string `json:"degradation"`
	Phase         string   `json:"phase"`
	ElapsedNanos  int64    `json:"elapsed_nanos"`
}

// factsOf decodes an event's facts; ok is false when it has none or they
// are not a JSON object.
func factsOf(ev *fakv1.Event) (f eventFacts, ok bool) {
	if len(ev.GetData()) == 0 {
		return f, false
	}
	return f, json.Unmarshal(ev.GetData(), &f) == nil
}

// budgetFacts is a charge (fsm: budgetFact).
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

// eventSummary renders what an event says on one line: fak's own events
// from their facts (who attached, who holds the lease, which epoch runs
// where, who answered an approval), everything else as its text followed by
// the top-level fields of its JSON data, if any. An event whose data cannot
// be read falls back to its text.
func eventSummary(ev *fakv1.Event) string {
	text := ev.GetText()
	var f eventFacts
	factsOK := len(ev.GetData()) > 0 && json.Unmarshal(ev.GetData(), &f) == nil
	switch ev.GetKind() {
	case kindSessionCreated:
		return text
	case kindSessionStopped:
		if factsOK && f.Child != "" {
			return joinNonEmpty(text+";", "continues as "+f.Child, "("+f.Source+")")
		}
		return text
	case kindEpochChanged:
		if !factsOK || f.Placement == nil {
			return text
		}
		s := fmt.Sprintf("epoch %d: %s", f.Epoch, formatPlacementFacts(f.Placement))
		switch f.Reason {
		case "":
		case "fresh":
			s += fmt.Sprintf(" (fresh: provider session %s, %s pruned)", f.ProviderSessionID, plural(uint64(f.Pruned), "cached provider entry"))
		default:
			if f.ProviderSessionID != "" {
				s += " (" + f.Reason + ": provider session " + f.ProviderSessionID + ")"
			} else {
				s += " (" + f.Reason + ")"
			}
		}
		return s
	case kindResetBoundary:
		if !factsOK {
			return text
		}
		return resetSummary(f)
	case kindProviderBoundary:
		if !factsOK || f.PreviousSession == "" {
			return text
		}
		s := joinNonEmpty(f.Source, "of", f.PreviousSession)
		if f.NewProviderSessionID != "" {
			s += "; " + joinNonEmpty(f.Provider, "provider session", f.NewProviderSessionID)
		}
		return s
	case kindProviderBound, kindProviderEnd:
		if !factsOK || f.Provider == "" && f.ProviderSessionID == "" {
			return text
		}
		s := joinNonEmpty(f.Provider, "session", f.ProviderSessionID)
		if ev.GetKind() == kindProviderBound {
			s += " bound"
			if f.Source != "" {
				s += " (" + f.Source + ")"
			}
		} else {
			s += " ended"
			if f.Reason != "" {
				s += ": " + f.Reason
			}
		}
		if f.Launch != "" {
			s += ", launch " + f.Launch
		}
		return s
	case kindCompaction:
		if !factsOK || f.Provider == "" {
			break // a client's annotation: text and data below
		}
		return joinNonEmpty(text, "("+joinNonEmpty(f.Provider, "session", f.ProviderSessionID)+")")
	case kindBudgetCharged, kindBudgetExhausted:
		if !factsOK {
			return text
		}
		return chargeSummary(ev.GetKind() == kindBudgetExhausted, f)
	case kindSessionForked:
		if !factsOK || f.SourceSession == "" {
			return text
		}
		return fmt.Sprintf("forked from %s at seq %d (%s copied)", f.SourceSession, f.ForkAddress, plural(uint64(f.CopiedEvents), "event"))
	case kindMoveRequested, kindMoveCheckpointed, kindMoveAdmitted, kindMoveRestored, kindMoveCutover, kindMoveFailed, kindMoveUnsafe:
		if !factsOK || f.MoveID == "" {
			return text
		}
		return moveSummary(ev.GetKind(), f)
	case kindAttachmentJoined:
		if !factsOK {
			return text
		}
		s := clientLabel(f.ClientKind, f.ClientName, f.AttachmentID) + " joined"
		if f.Node != "" {
			s += " via " + f.Node
		}
		if len(f.Capabilities) > 0 {
			s += "; can " + strings.Join(f.Capabilities, ", ")
		}
		return s
	case kindAttachmentLeft:
		if !factsOK {
			return text
		}
		s := clientLabel(f.ClientKind, f.ClientName, f.AttachmentID) + " left"
		if f.Reason != "" {
			s += ": " + f.Reason
		}
		return s
	case kindLeaseTaken:
		if !factsOK {
			return text
		}
		var s string
		if f.StolenFrom != "" {
			s = "stolen from " + clientLabel(strings.TrimSpace(f.StolenFromName), "", f.StolenFrom) + " by " + clientLabel(f.ClientKind, f.ClientName, f.AttachmentID)
		} else {
			s = "taken by " + clientLabel(f.ClientKind, f.ClientName, f.AttachmentID)
		}
		if f.ExpiresUnixNs != 0 {
			s += ", expires " + formatClock(f.ExpiresUnixNs)
		}
		return s
	case kindLeaseReleased:
		if !factsOK {
			return text
		}
		s := "released by " + clientLabel(f.ClientKind, f.ClientName, f.AttachmentID)
		if f.Reason != "" {
			s += ": " + f.Reason
		}
		return s
	case kindInput:
		if !factsOK {
			return text
		}
		return clientName(f.ClientKind, f.ClientName) + ": " + text
	case kindApprovalAnswered:
		if !factsOK {
			return text
		}
		verdict := "denied"
		if f.Approved {
			verdict = "approved"
		}
		s := fmt.Sprintf("%s (request %d) by %s", verdict, f.ApprovalSeq, clientName(f.ClientKind, f.ClientName))
		if f.Note != "" {
			s += ": " + f.Note
		}
		return s
	}
	// Runner events (turn.*, output, tool.*, approval.requested) and client
	// annotations: the text, then whatever structured facts came with it.
	return joinNonEmpty(text, dataFields(ev.GetData()))
}

// moveSummary renders one transition of a move for session log:
// "mov_… requested (operator): n1 epoch 2 → n2", "mov_… checkpointed at
// seq 41 (digest 1a2b…)", "mov_… n2 admitted (alive, …)", "mov_… restored
// on n2 as epoch 3", "mov_… cutover n1 → n2, epoch 3 (operator)",
// "mov_… MOVE_FAILED in CHECKPOINTED: reason".
func moveSummary(kind string, f eventFacts) string {
	id := f.MoveID
	after := ""
	if f.ElapsedNanos > 0 {
		after = fmt.Sprintf(" (+%dms)", time.Duration(f.ElapsedNanos).Milliseconds())
	}
	switch kind {
	case kindMoveRequested:
		to := f.To
		if to == "" {
			to = "any admitted node"
		}
		s := id + " requested"
		if f.Cause != "" {
			s += " (" + f.Cause + ")"
		}
		return fmt.Sprintf("%s: %s epoch %d → %s", s, f.From, f.SourceEpoch, to)
	case kindMoveCheckpointed:
		return fmt.Sprintf("%s checkpointed at seq %d (epoch %d, digest %s)%s", id, f.CheckpointSeq, f.SourceEpoch, shortDigest(f.Digest), after)
	case kindMoveAdmitted:
		s := id + " " + f.To + " admitted"
		if f.Placement != nil {
			s += " as " + formatPlacementFacts(f.Placement)
		}
		if len(f.Checks) > 0 {
			s += " (" + strings.Join(f.Checks, ", ") + ")"
		}
		if len(f.Degradation) > 0 {
			s += "; degradation: " + strings.Join(f.Degradation, "; ")
		}
		return s + after
	case kindMoveRestored:
		return fmt.Sprintf("%s restored on %s as epoch %d%s", id, f.To, f.NewEpoch, after)
	case kindMoveCutover:
		s := fmt.Sprintf("%s cutover %s → %s, epoch %d", id, f.From, f.To, f.NewEpoch)
		if f.Cause != "" {
			s += " (" + f.Cause + ")"
		}
		return s + after
	}
	s := id + " " + f.State
	if f.Phase != "" {
		s += " in " + f.Phase
	}
	if f.Reason != "" {
		s += ": " + f.Reason
	}
	return s + after
}

// resetSummary renders a reset boundary: what it cleared, the provider
// session it rotated to and the context axis re-armed.
func resetSummary(f eventFacts) string {
	var cleared []string
	if len(f.ClearedInputs) > 0 {
		seqs := make([]string, len(f.ClearedInputs))
		for i, seq := range f.ClearedInputs {
			seqs[i] = formatUint(seq)
		}
		cleared = append(cleared, "queued inputs "+strings.Join(seqs, ", "))
	}
	if f.ClearedTurn != 0 {
		cleared = append(cleared, "the turn of input "+formatUint(f.ClearedTurn))
	}
	if f.ClearedApproval != 0 {
		cleared = append(cleared, "approval request "+formatUint(f.ClearedApproval))
	}
	s := "context reset"
	if len(cleared) > 0 {
		s += ", cleared " + strings.Join(cleared, ", ")
	}
	if f.ProviderSessionID != "" {
		s += "; provider session " + f.ProviderSessionID
	}
	if f.ContextRearmedTo != 0 {
		s += fmt.Sprintf("; context re-armed to %d tokens", f.ContextRearmedTo)
	}
	return s
}

// chargeSummary renders a charge or a refused one: "charged 100 output
// tokens, spend 0.25; context +500 tokens (via launch L)" or "refused
// spend (exhausted): asked spend 0.25".
func chargeSummary(refused bool, f eventFacts) string {
	asked := formatCharge(f.Usage)
	if f.ContextTokens != 0 {
		c := fmt.Sprintf("context +%d tokens", f.ContextTokens)
		if asked != "" {
			c = "; " + c
		}
		asked += c
	}
	if asked == "" {
		asked = "nothing"
	}
	var s string
	if refused {
		s = "refused: " + axisName(f.Exhausted) + " exhausted; asked " + asked
	} else {
		s = "charged " + asked
	}
	if f.ViaLaunch != "" {
		s += " (via launch " + f.ViaLaunch + ")"
	}
	return s
}

// formatCharge lists the non-zero axes of a charge: "1 turn, 100 output
// tokens, spend 0.25".
func formatCharge(b *budgetFacts) string {
	if b == nil {
		return ""
	}
	var parts []string
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
	return strings.Join(parts, ", ")
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

// formatPlacementFacts renders "echo on n1, model m, provider p, account a".
func formatPlacementFacts(p *placementFacts) string {
	return formatPlacement(&fakv1.Placement{
		RuntimeAdapter: p.RuntimeAdapter, Provider: p.Provider, AccountRef: p.AccountRef, Model: p.Model, Node: p.Node,
	})
}

// formatPlacement renders a placement tuple on one line, leaving out what
// is not set.
func formatPlacement(p *fakv1.Placement) string {
	if p == nil {
		return ""
	}
	s := p.GetRuntimeAdapter()
	if s == "" {
		s = "(no adapter)"
	}
	if p.GetNode() != "" {
		s += " on " + p.GetNode()
	}
	for _, part := range [][2]string{{"model", p.GetModel()}, {"provider", p.GetProvider()}, {"account", p.GetAccountRef()}} {
		if part[1] != "" {
			s += ", " + part[0] + " " + part[1]
		}
	}
	return s
}

// dataFields renders a JSON object's top-level fields as "[k=v k=v]" in key
// order, strings quoted when they would be ambiguous, nested values as
// compact JSON. Other JSON is shown compacted in brackets; data that is not
// JSON as its size.
func dataFields(data []byte) string {
	if len(bytes.TrimSpace(data)) == 0 {
		return ""
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		var compact bytes.Buffer
		if json.Compact(&compact, data) != nil {
			return fmt.Sprintf("[%d bytes of data]", len(data))
		}
		return "[" + compact.String() + "]"
	}
	if len(fields) == 0 {
		return ""
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+dataValue(fields[k]))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func dataValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" || strings.ContainsAny(s, " \t\"=[]") {
			return strconv.Quote(s)
		}
		return s
	}
	var compact bytes.Buffer
	if json.Compact(&compact, raw) != nil {
		return string(raw)
	}
	return compact.String()
}

func joinNonEmpty(parts ...string) string {
	kept := parts[:0:0]
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, " ")
}

// formatClock renders a Unix nanosecond time as a local time of day.
func formatClock(unixNano int64) string {
	return time.Unix(0, unixNano).Local().Format(eventTimeLayout)
}
