package fsm

import (
	"encoding/json"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The facts: the structured data (JSON in Event.data) of the events the
// FSM writes itself. Every kind the FSM writes has its fact type here, so
// the writer's side of the journal vocabulary is one file; the reader's
// side is client/journal, whose tests decode every fact written here.
//
// The types are unexported on purpose: clients must not depend on fsm. A
// field added here is a field of the journal's public vocabulary: add it
// to client/journal too (its test fails until then).

// fact encodes an event's structured payload. encoding/json writes struct
// fields in declaration order, so every replica produces the same bytes.
func fact(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("fsm: marshal fact: " + err.Error())
	}
	return b
}

// placementFact is a placement tuple inside other facts (epoch.changed,
// move.admitted).
type placementFact struct {
	RuntimeAdapter string `json:"runtime_adapter"`
	Provider       string `json:"provider,omitempty"`
	AccountRef     string `json:"account_ref,omitempty"`
	Model          string `json:"model,omitempty"`
	Node           string `json:"node,omitempty"`
	LaunchID       string `json:"launch_id,omitempty"`
	Host           string `json:"host,omitempty"`
}

func placementFactOf(p *fsmpb.Placement) placementFact {
	return placementFact{RuntimeAdapter: p.RuntimeAdapter, Provider: p.Provider, AccountRef: p.AccountRef, Model: p.Model, Node: p.Node,
		LaunchID: p.LaunchId, Host: p.Host}
}

// epochFact is the data of the first epoch.changed of a session (created,
// cleared, forked or renewed).
type epochFact struct {
	Epoch     uint64        `json:"epoch"`
	Placement placementFact `json:"placement"`
}

// epochChangeFact is the data of a later epoch.changed: why the epoch
// changed (fresh, resume, move) and the provider binding it carries.
type epochChangeFact struct {
	Epoch             uint64        `json:"epoch"`
	Placement         placementFact `json:"placement"`
	Reason            string        `json:"reason"`
	ProviderSessionID string        `json:"provider_session_id,omitempty"`
	Pruned            uint32        `json:"pruned,omitempty"`
}

// attachmentFact is the data of attachment.joined and attachment.left.
type attachmentFact struct {
	AttachmentID string   `json:"attachment_id"`
	ClientKind   string   `json:"client_kind"`
	ClientName   string   `json:"client_name,omitempty"`
	Node         string   `json:"node,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	Reason       string   `json:"reason,omitempty"`
}

// leaseFact is the data of lease.taken and lease.released.
type leaseFact struct {
	AttachmentID   string `json:"attachment_id"`
	ClientKind     string `json:"client_kind,omitempty"`
	ClientName     string `json:"client_name,omitempty"`
	ExpiresUnixNs  int64  `json:"expires_unix_nano,omitempty"`
	StolenFrom     string `json:"stolen_from,omitempty"`
	StolenFromName string `json:"stolen_from_name,omitempty"`
	Reason         string `json:"reason,omitempty"`
}

// inputFact is the data of input: who sent it, against which epoch.
type inputFact struct {
	AttachmentID string `json:"attachment_id"`
	ClientKind   string `json:"client_kind"`
	ClientName   string `json:"client_name,omitempty"`
	Epoch        uint64 `json:"epoch"`
}

// approvalFact is the data of approval.answered.
type approvalFact struct {
	ApprovalSeq  uint64 `json:"approval_seq"`
	Approved     bool   `json:"approved"`
	AttachmentID string `json:"attachment_id"`
	ClientKind   string `json:"client_kind"`
	ClientName   string `json:"client_name,omitempty"`
	Note         string `json:"note,omitempty"`
}

// resetFact is the data of reset_boundary: what the reset cleared.
type resetFact struct {
	ClearedInputs     []uint64 `json:"cleared_inputs,omitempty"`
	ClearedTurn       uint64   `json:"cleared_turn,omitempty"`
	ClearedApproval   uint64   `json:"cleared_approval,omitempty"`
	ProviderSessionID string   `json:"provider_session_id"`
	ContextRearmedTo  uint64   `json:"context_rearmed_to"`
}

// boundaryFact is the data of the provider-boundary event that opens the
// child of a clear or new.
type boundaryFact struct {
	Provider          string `json:"provider"`
	Source            string `json:"source"`
	PreviousSession   string `json:"previous_session"`
	ProviderSessionID string `json:"new_provider_session_id"`
}

// stopFact is the data of the session.stopped of a cleared (or renewed)
// session: the child it continues in. A plain stop has no data.
type stopFact struct {
	Child  string `json:"child"`
	Source string `json:"source"`
}

// forkFact is the data of session.forked.
type forkFact struct {
	Source      string `json:"source_session"`
	ForkAddress uint64 `json:"fork_address"`
	Copied      int    `json:"copied_events"`
}

// providerFact is the data of provider.bound, provider.session_end and a
// provider's compaction (fak guard's hooks).
type providerFact struct {
	Provider          string          `json:"provider"`
	Source            string          `json:"source,omitempty"`
	Reason            string          `json:"reason,omitempty"`
	ProviderSessionID string          `json:"provider_session_id,omitempty"`
	Launch            string          `json:"launch,omitempty"`
	Metadata          json.RawMessage `json:"metadata,omitempty"`
	// Epoch: a provider runtime's binding, the epoch whose turn bound it.
	Epoch uint64 `json:"epoch,omitempty"`
}

// metadataFact keeps hook metadata that is valid JSON verbatim (the guard
// sends the provider's JSON object); anything else is dropped.
func metadataFact(b []byte) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return nil
	}
	return json.RawMessage(b)
}

// chargeFact is the data of budget.charged and budget.exhausted (a refused
// charge names the exhausted axis).
type chargeFact struct {
	Usage         *budgetFact `json:"usage"`
	ContextTokens uint64      `json:"context_tokens,omitempty"`
	Envelope      string      `json:"envelope"`
	Exhausted     string      `json:"exhausted,omitempty"`
	ViaLaunch     string      `json:"via_launch,omitempty"`
	Incurred      bool        `json:"incurred,omitempty"`
	// Unmetered: why the gateway could not charge the call when it ended
	// (a late journal of it).
	Unmetered string `json:"unmetered,omitempty"`
}

// budgetFact is the usage of one charge.
type budgetFact struct {
	Turns        uint64 `json:"turns,omitempty"`
	OutputTokens uint64 `json:"output_tokens,omitempty"`
	Queries      uint64 `json:"queries,omitempty"`
	SpendMicros  uint64 `json:"spend_micros,omitempty"`
	ToolCalls    uint64 `json:"tool_calls,omitempty"`
	InputTokens  uint64 `json:"input_tokens,omitempty"`
}

func budgetFactOf(b *fsmpb.Budget) *budgetFact {
	return &budgetFact{Turns: b.GetTurns(), OutputTokens: b.GetOutputTokens(), Queries: b.GetQueries(),
		SpendMicros: b.GetSpendMicros(), ToolCalls: b.GetToolCalls(), InputTokens: b.GetInputTokens()}
}

// moveFact is the data of every move.* event: the move's id and state, and
// what the transition fixed.
type moveFact struct {
	MoveID        string         `json:"move_id"`
	State         string         `json:"state"`
	Cause         string         `json:"cause,omitempty"`
	From          string         `json:"from,omitempty"`
	To            string         `json:"to,omitempty"`
	Placement     *placementFact `json:"placement,omitempty"`
	SourceEpoch   uint64         `json:"source_epoch,omitempty"`
	CheckpointSeq uint64         `json:"checkpoint_seq,omitempty"`
	Digest        string         `json:"digest,omitempty"`
	NewEpoch      uint64         `json:"new_epoch,omitempty"`
	Checks        []string       `json:"checks,omitempty"`
	Degradation   []string       `json:"degradation,omitempty"`
	Reason        string         `json:"reason,omitempty"`
	Phase         string         `json:"phase,omitempty"`
	ElapsedNanos  int64          `json:"elapsed_nanos,omitempty"`
	Interrupt     bool           `json:"interrupt,omitempty"` // move.requested: the turn in flight is interrupted
	Workspace     *workspaceFact `json:"workspace,omitempty"` // move.checkpointed: the workspace carried
	Transfer      *transferFact  `json:"transfer,omitempty"`  // move.restored: what restoring it cost
	// move.checkpointed of a recovery: the node whose copy it restores,
	// or that none survives (the session starts with an empty workspace).
	WorkspaceFrom  string `json:"workspace_from,omitempty"`
	WorkspaceReset bool   `json:"workspace_reset,omitempty"`
	// move.restored and move.warmed: the cache lineage continued.
	Cache *cacheFact `json:"cache,omitempty"`
	// move.warmed: the first turn after cutover (its input) and its time.
	WarmupNanos int64  `json:"warmup_nanos,omitempty"`
	InputSeq    uint64 `json:"input_seq,omitempty"`
}

// workspaceFact is a workspace snapshot a checkpoint carries.
type workspaceFact struct {
	Digest        string `json:"digest"`
	Bytes         uint64 `json:"bytes"`
	Chunks        uint32 `json:"chunks"`
	SnapshotNanos int64  `json:"snapshot_nanos,omitempty"`
}

// transferFact is what a destination did to restore a workspace.
type transferFact struct {
	BytesSent     uint64 `json:"bytes_sent"`
	BytesPresent  uint64 `json:"bytes_present"`
	ChunksSent    uint32 `json:"chunks_sent"`
	ChunksPresent uint32 `json:"chunks_present"`
	FetchNanos    int64  `json:"fetch_nanos"`
	RestoreNanos  int64  `json:"restore_nanos"`
}

// interruptFact is the data of the turn.completed the FSM writes when it
// closes a running turn itself (an interrupt, a move with interrupt, a
// launch taking the session over). Its keys are those of the runner's
// turn facts (node/runner: turnFact), plus who interrupted.
type interruptFact struct {
	Status   string          `json:"status"`
	InputSeq uint64          `json:"input_seq"`
	By       interruptByFact `json:"by"`
}

// refusedTurnFact is the data of the turn.completed that closes a turn
// the envelope refused; its keys are those of the runner's turn facts.
type refusedTurnFact struct {
	Status   string `json:"status"`
	Reason   string `json:"reason"`
	InputSeq uint64 `json:"input_seq"`
}

// interruptByFact names who interrupted a turn: an attachment, a move or
// a launch.
type interruptByFact struct {
	AttachmentID string `json:"attachment_id,omitempty"`
	ClientKind   string `json:"client_kind,omitempty"`
	ClientName   string `json:"client_name,omitempty"`
	Move         string `json:"move,omitempty"`
	Launch       string `json:"launch,omitempty"`
}

// strandedFact is the data of session.stranded (marked or unmarked).
type strandedFact struct {
	Node     string `json:"node"`
	Stranded bool   `json:"stranded"`
	Reason   string `json:"reason"`
}
