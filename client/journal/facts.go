package journal

import (
	"encoding/json"
	"errors"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// Fact is the typed data of an event: one of the types below, as a value.
// Which type an event carries depends on its kind only (Decode).
type Fact interface{ isFact() }

// Placement is a placement tuple inside a fact (fsm: placementFact).
type Placement struct {
	RuntimeAdapter string `json:"runtime_adapter"`
	Provider       string `json:"provider,omitempty"`
	AccountRef     string `json:"account_ref,omitempty"`
	Model          string `json:"model,omitempty"`
	Node           string `json:"node,omitempty"`
	// The external runtime's launch and host.
	LaunchID string `json:"launch_id,omitempty"`
	Host     string `json:"host,omitempty"`
}

// API is the placement as the API's message.
func (p Placement) API() *fakv1.Placement {
	return &fakv1.Placement{RuntimeAdapter: p.RuntimeAdapter, Provider: p.Provider, AccountRef: p.AccountRef, Model: p.Model, Node: p.Node,
		LaunchId: p.LaunchID, Host: p.Host}
}

// EpochChange is the fact of epoch.changed (fsm: epochFact for a session's
// first epoch, epochChangeFact for fresh, resume and move).
type EpochChange struct {
	Epoch             uint64     `json:"epoch"`
	Placement         *Placement `json:"placement"`
	Reason            string     `json:"reason,omitempty"`
	ProviderSessionID string     `json:"provider_session_id,omitempty"`
	Pruned            uint32     `json:"pruned,omitempty"`
}

// Stop is the fact of the session.stopped of a cleared or renewed session:
// the child it continues in (fsm: stopFact). A plain stop has no data.
type Stop struct {
	Child  string `json:"child"`
	Source string `json:"source"`
}

// Attachment is the fact of attachment.joined and attachment.left (fsm:
// attachmentFact).
type Attachment struct {
	AttachmentID string   `json:"attachment_id"`
	ClientKind   string   `json:"client_kind"`
	ClientName   string   `json:"client_name,omitempty"`
	Node         string   `json:"node,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	Reason       string   `json:"reason,omitempty"`
}

// Lease is the fact of lease.taken and lease.released (fsm: leaseFact).
// StolenFromName is the previous holder's "kind name".
type Lease struct {
	AttachmentID    string `json:"attachment_id"`
	ClientKind      string `json:"client_kind,omitempty"`
	ClientName      string `json:"client_name,omitempty"`
	ExpiresUnixNano int64  `json:"expires_unix_nano,omitempty"`
	StolenFrom      string `json:"stolen_from,omitempty"`
	StolenFromName  string `json:"stolen_from_name,omitempty"`
	Reason          string `json:"reason,omitempty"`
}

// Input is the fact of input: who sent it, against which epoch (fsm:
// inputFact).
type Input struct {
	AttachmentID string `json:"attachment_id"`
	ClientKind   string `json:"client_kind"`
	ClientName   string `json:"client_name,omitempty"`
	Epoch        uint64 `json:"epoch"`
}

// ApprovalAnswer is the fact of approval.answered (fsm: approvalFact).
type ApprovalAnswer struct {
	ApprovalSeq  uint64 `json:"approval_seq"`
	Approved     bool   `json:"approved"`
	AttachmentID string `json:"attachment_id"`
	ClientKind   string `json:"client_kind"`
	ClientName   string `json:"client_name,omitempty"`
	Note         string `json:"note,omitempty"`
}

// Reset is the fact of reset_boundary: what the reset cleared (fsm:
// resetFact).
type Reset struct {
	ClearedInputs     []uint64 `json:"cleared_inputs,omitempty"`
	ClearedTurn       uint64   `json:"cleared_turn,omitempty"`
	ClearedApproval   uint64   `json:"cleared_approval,omitempty"`
	ProviderSessionID string   `json:"provider_session_id"`
	ContextRearmedTo  uint64   `json:"context_rearmed_to"`
}

// ProviderBoundary is the fact of the provider-boundary event that opens
// the child of a clear or new (fsm: boundaryFact).
type ProviderBoundary struct {
	Provider             string `json:"provider"`
	Source               string `json:"source"`
	PreviousSession      string `json:"previous_session"`
	NewProviderSessionID string `json:"new_provider_session_id"`
}

// Provider is the fact of provider.bound, provider.session_end and a
// provider's compaction (fsm: providerFact). A compaction a client appended
// carries whatever data the client gave; its Provider is then empty.
type Provider struct {
	Provider          string          `json:"provider"`
	Source            string          `json:"source,omitempty"`
	Reason            string          `json:"reason,omitempty"`
	ProviderSessionID string          `json:"provider_session_id,omitempty"`
	Launch            string          `json:"launch"`
	Metadata          json.RawMessage `json:"metadata,omitempty"`
}

// Charge is the fact of budget.charged and budget.exhausted (fsm:
// chargeFact); a refused charge names the exhausted axis.
type Charge struct {
	Usage         *Budget `json:"usage"`
	ContextTokens uint64  `json:"context_tokens,omitempty"`
	Envelope      string  `json:"envelope"`
	Exhausted     string  `json:"exhausted,omitempty"`
	ViaLaunch     string  `json:"via_launch,omitempty"`
	Incurred      bool    `json:"incurred,omitempty"`
	// Unmetered: a gateway's late journal of a call it could not charge
	// when it ended, and why (UNAUTHENTICATED, UNAVAILABLE, ...).
	Unmetered string `json:"unmetered,omitempty"`
}

// Budget is the usage of one charge (fsm: budgetFact).
type Budget struct {
	Turns        uint64 `json:"turns,omitempty"`
	OutputTokens uint64 `json:"output_tokens,omitempty"`
	Queries      uint64 `json:"queries,omitempty"`
	SpendMicros  uint64 `json:"spend_micros,omitempty"`
	ToolCalls    uint64 `json:"tool_calls,omitempty"`
}

// Fork is the fact of session.forked (fsm: forkFact).
type Fork struct {
	SourceSession string `json:"source_session"`
	ForkAddress   uint64 `json:"fork_address"`
	CopiedEvents  int    `json:"copied_events"`
}

// Stranded is the fact of session.stranded, marked or unmarked (fsm:
// strandedFact).
type Stranded struct {
	Node     string `json:"node"`
	Stranded bool   `json:"stranded"`
	Reason   string `json:"reason"`
}

// Move is the fact of every move.* event: the move's id and state, and
// what the transition fixed (fsm: moveFact).
type Move struct {
	MoveID        string     `json:"move_id"`
	State         string     `json:"state"`
	Cause         string     `json:"cause,omitempty"`
	From          string     `json:"from,omitempty"`
	To            string     `json:"to,omitempty"`
	Placement     *Placement `json:"placement,omitempty"`
	SourceEpoch   uint64     `json:"source_epoch,omitempty"`
	CheckpointSeq uint64     `json:"checkpoint_seq,omitempty"`
	Digest        string     `json:"digest,omitempty"`
	NewEpoch      uint64     `json:"new_epoch,omitempty"`
	Checks        []string   `json:"checks,omitempty"`
	Degradation   []string   `json:"degradation,omitempty"`
	Reason        string     `json:"reason,omitempty"`
	Phase         string     `json:"phase,omitempty"`
	ElapsedNanos  int64      `json:"elapsed_nanos,omitempty"`
	Interrupt     bool       `json:"interrupt,omitempty"` // move.requested: the turn in flight is interrupted
	// move.checkpointed: the workspace the checkpoint carries;
	// move.restored: what restoring it cost on the destination.
	Workspace *Workspace `json:"workspace,omitempty"`
	Transfer  *Transfer  `json:"transfer,omitempty"`
	// move.restored, move.warmed: what the destination continues of the
	// provider's cache.
	Cache *Cache `json:"cache,omitempty"`
	// move.warmed: the first turn after cutover (its input) and its time.
	WarmupNanos int64  `json:"warmup_nanos,omitempty"`
	InputSeq    uint64 `json:"input_seq,omitempty"`
}

// Cache is a move's cache lineage: the provider thread the destination
// resumes and whether the provider's cache can still be warm (Cache:
// "warm", "cold" — Why says what changed — or "none").
type Cache struct {
	ProviderThread string `json:"provider_thread,omitempty"`
	Cache          string `json:"cache"`
	Why            string `json:"why,omitempty"`
}

// Workspace is a workspace snapshot a move's checkpoint carries.
type Workspace struct {
	Digest        string `json:"digest"`
	Bytes         uint64 `json:"bytes"`
	Chunks        uint32 `json:"chunks"`
	SnapshotNanos int64  `json:"snapshot_nanos,omitempty"`
}

// Transfer is what a move's destination did to restore the workspace.
type Transfer struct {
	BytesSent     uint64 `json:"bytes_sent"`
	BytesPresent  uint64 `json:"bytes_present"`
	ChunksSent    uint32 `json:"chunks_sent"`
	ChunksPresent uint32 `json:"chunks_present"`
	FetchNanos    int64  `json:"fetch_nanos"`
	RestoreNanos  int64  `json:"restore_nanos"`
}

// Turn is the fact of turn.started and turn.completed as the runner writes
// it (node/runner: turnFact), and of the turn.completed the fleet writes
// when it interrupts a turn (fsm: interruptFact: status interrupted, By);
// a runtime may add facts of its own, which Decode ignores.
type Turn struct {
	Status   string  `json:"status,omitempty"`
	Reason   string  `json:"reason,omitempty"`
	InputSeq uint64  `json:"input_seq"`
	Node     string  `json:"node,omitempty"`
	Adapter  string  `json:"adapter,omitempty"`
	Error    string  `json:"error,omitempty"`
	By       *TurnBy `json:"by,omitempty"`
}

// TurnBy names who interrupted a turn (fsm: interruptByFact): an
// attachment, a move, or a launch that took the session over.
type TurnBy struct {
	AttachmentID string `json:"attachment_id,omitempty"`
	ClientKind   string `json:"client_kind,omitempty"`
	ClientName   string `json:"client_name,omitempty"`
	Move         string `json:"move,omitempty"`
	Launch       string `json:"launch,omitempty"`
}

// StatusInterrupted is the status of a turn closed before it finished.
const StatusInterrupted = "interrupted"

// Tool is the fact of tool.call, tool.result and approval.requested as
// runtimes write it (the echo runtime's toolFact): the tool, its
// arguments, and for a result whether the call was approved.
type Tool struct {
	Tool     string          `json:"tool"`
	Args     json.RawMessage `json:"args,omitempty"`
	Approved *bool           `json:"approved,omitempty"`
}

func (EpochChange) isFact()      {}
func (Stop) isFact()             {}
func (Attachment) isFact()       {}
func (Lease) isFact()            {}
func (Input) isFact()            {}
func (ApprovalAnswer) isFact()   {}
func (Reset) isFact()            {}
func (ProviderBoundary) isFact() {}
func (Provider) isFact()         {}
func (Charge) isFact()           {}
func (Fork) isFact()             {}
func (Stranded) isFact()         {}
func (Move) isFact()             {}
func (Turn) isFact()             {}
func (Tool) isFact()             {}

// decoders maps each kind that carries a fact to its decoder. The other
// kinds (session.created, output, note, checkpoint) carry none: their
// data, if any, is free-form.
var decoders = map[string]func([]byte) (Fact, error){
	KindSessionStopped:    decode[Stop],
	KindEpochChanged:      decode[EpochChange],
	KindAttachmentJoined:  decode[Attachment],
	KindAttachmentLeft:    decode[Attachment],
	KindLeaseTaken:        decode[Lease],
	KindLeaseReleased:     decode[Lease],
	KindInput:             decode[Input],
	KindApprovalAnswered:  decode[ApprovalAnswer],
	KindResetBoundary:     decode[Reset],
	KindProviderBoundary:  decode[ProviderBoundary],
	KindProviderBound:     decode[Provider],
	KindProviderEnd:       decode[Provider],
	KindCompaction:        decode[Provider],
	KindBudgetCharged:     decode[Charge],
	KindBudgetExhausted:   decode[Charge],
	KindSessionForked:     decode[Fork],
	KindSessionStranded:   decode[Stranded],
	KindMoveRequested:     decode[Move],
	KindMoveCheckpointed:  decode[Move],
	KindMoveAdmitted:      decode[Move],
	KindMoveRestored:      decode[Move],
	KindMoveCutover:       decode[Move],
	KindMoveFailed:        decode[Move],
	KindMoveUnsafe:        decode[Move],
	KindMoveWarmed:        decode[Move],
	KindTurnStarted:       decode[Turn],
	KindTurnCompleted:     decode[Turn],
	KindToolCall:          decode[Tool],
	KindToolResult:        decode[Tool],
	KindApprovalRequested: decode[Tool],
}

func decode[T Fact](data []byte) (Fact, error) {
	var f T
	if err := json.Unmarshal(data, &f); err != nil {
		var zero T
		return zero, err
	}
	return f, nil
}

// ErrNoData is Decode's error for an event without data whose kind carries
// a fact (a plain session.stopped, a runner's bare turn.started).
var ErrNoData = errors.New("the event has no data")

// Decode returns the typed fact of an event, by its kind: for a kind that
// carries a fact, a value of its type (the zero value, with an error, when
// the data is absent, ErrNoData, or does not decode); for the others, nil
// and no error. Unknown fields are ignored (a runtime may add its own).
func Decode(ev *fakv1.Event) (Fact, error) {
	dec := decoders[ev.GetKind()]
	if dec == nil {
		return nil, nil
	}
	if len(ev.GetData()) == 0 {
		f, _ := dec([]byte("{}"))
		return f, ErrNoData
	}
	return dec(ev.GetData())
}

// CarriesFact reports whether events of kind carry a typed fact.
func CarriesFact(kind string) bool { return decoders[kind] != nil }
