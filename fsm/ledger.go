package fsm

import (
	"crypto/sha256"
	"encoding/hex"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The reset ledger (DESIGN.md §5): fresh, reset, clear/new and fork. Each
// is one command, so each is atomic, and each is idempotent: under its
// request id like every command, and clear/new also by the provider id its
// child's id derives from.

// Stop reasons of a session ended by a boundary.
const (
	StopProviderClear = "PROVIDER_SESSION_CLEAR"
	StopUserClear     = "USER_CLEAR"
	StopUserNew       = "USER_NEW"
)

// ChildSessionID derives a clear/new child's id from (parent, provider
// session id): the same provider conversation always maps to the same fak
// session, so a repeated hook delivery finds the child instead of making a
// second one.
func ChildSessionID(parent, providerSessionID string) string {
	h := sha256.Sum256([]byte(parent + "\x00" + providerSessionID))
	return "ses_" + hex.EncodeToString(h[:14])
}

func validProviderID(id string) *Error {
	if id == "" || len(id) > MaxSessionIDBytes {
		return errorf(ReasonInvalidArgument, "the new provider session id must be 1-%d bytes", MaxSessionIDBytes)
	}
	return nil
}

// freshSession: new provider-facing id and epoch binding, cached provider
// state pruned (the count is reported; 0 is normal). No reset boundary;
// messages and queued inputs stay.
func (a *applier) freshSession(c *fsmpb.Command, cmd *fsmpb.FreshSession) (*fsmpb.Result, *Error) {
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	if err := activeSession(s); err != nil {
		return nil, err
	}
	if err := validProviderID(cmd.ProviderSessionId); err != nil {
		return nil, err
	}
	pruned := s.ProviderCacheEntries
	s.ProviderCacheEntries = 0
	s.ProviderSessionId = cmd.ProviderSessionId
	s.ProviderThread = false
	bumpEpoch(s)
	s.UpdatedUnixNano = c.TimeUnixNano
	a.putEvents(newEvent(s, c, KindEpochChanged, epochText(s.Epoch, s.Placement)+" (fresh)", fact(epochChangeFact{
		Epoch: s.Epoch, Placement: placementFactOf(s.Placement), Reason: "fresh",
		ProviderSessionID: s.ProviderSessionId, Pruned: pruned,
	})))
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Boundary{Boundary: &fsmpb.Boundary{Action: "fresh", Session: s, Pruned: pruned}}}, nil
}

// resetSession: a reset_boundary; the runner rebuilds the model context
// from the events after it. Refused with BUSY while a turn runs.
func (a *applier) resetSession(c *fsmpb.Command, cmd *fsmpb.ResetSession) (*fsmpb.Result, *Error) {
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	if err := activeSession(s); err != nil {
		return nil, err
	}
	if s.TurnInputSeq != 0 {
		return nil, errorf(ReasonBusy, "a turn is in flight (input #%d); reset when it completes", s.TurnInputSeq)
	}
	if err := validProviderID(cmd.ProviderSessionId); err != nil {
		return nil, err
	}
	f := resetFact{ClearedInputs: s.QueuedInputs, ClearedApproval: s.PendingApprovalSeq,
		ProviderSessionID: cmd.ProviderSessionId, ContextRearmedTo: s.ContextCap}
	s.QueuedInputs = nil
	s.PendingApprovalSeq = 0
	s.ContextUsed = 0
	s.ProviderSessionId = cmd.ProviderSessionId
	s.ProviderThread = false
	s.ProviderCacheEntries = 0
	s.Resets++
	s.UpdatedUnixNano = c.TimeUnixNano
	ev := newEvent(s, c, KindResetBoundary, "context reset", fact(f))
	s.ResetSeq = ev.Seq
	a.putEvents(ev)
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Boundary{Boundary: &fsmpb.Boundary{Action: "reset", Session: s}}}, nil
}

// clearSession ends s and opens its child in one command: s becomes
// STOPPED (kept for audit), the child starts with the provider-boundary
// event, shares s's envelope, gets a re-armed context axis and none of s's
// conversation-local state (objective, pending turn, queued inputs).
func (a *applier) clearSession(c *fsmpb.Command, cmd *fsmpb.ClearSession) (*fsmpb.Result, *Error) {
	if cmd.Source != "clear" && cmd.Source != "new" {
		return nil, errorf(ReasonInvalidArgument, "source must be clear or new")
	}
	if err := validProviderID(cmd.ProviderSessionId); err != nil {
		return nil, err
	}
	if len(cmd.Provider) > MaxPlacementFieldBytes {
		return nil, errorf(ReasonInvalidArgument, "provider longer than %d bytes", MaxPlacementFieldBytes)
	}
	switch cmd.Reason {
	case "", StopProviderClear, StopUserClear, StopUserNew:
	default:
		return nil, errorf(ReasonInvalidArgument, "stop reason must be %s, %s or %s", StopProviderClear, StopUserClear, StopUserNew)
	}
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	childID := ChildSessionID(s.SessionId, cmd.ProviderSessionId)
	if child, cerr := a.loadSession(childID); cerr == nil {
		// A repeat (hook redelivery, retried request): same child, no change.
		return &fsmpb.Result{NoOp: true, Body: &fsmpb.Result_Boundary{Boundary: &fsmpb.Boundary{
			Action: "no_op", Session: child, PreviousSession: s.SessionId}}}, nil
	}
	if err := activeSession(s); err != nil {
		return nil, err
	}
	reason := cmd.Reason
	if reason == "" {
		reason = StopProviderClear
	}
	child := a.childOf(c, s, childID, cmd.Source, cmd.Provider, cmd.ProviderSessionId, 0)
	child.Title = s.Title
	a.putEvents(newEvent(child, c, KindSessionCreated, child.Title, nil),
		newEvent(child, c, KindEpochChanged, epochText(1, child.Placement), fact(epochFact{Epoch: 1, Placement: placementFactOf(child.Placement)})),
		newEvent(child, c, KindProviderBoundary, cmd.Source+" of "+s.SessionId, fact(boundaryFact{
			Provider: child.Provider, Source: cmd.Source, PreviousSession: s.SessionId, ProviderSessionID: cmd.ProviderSessionId,
		})))
	a.putSession(child)
	a.followToChild(c, s.SessionId, childID)
	a.endOpenMove(c, s, "session stopped ("+reason+")")
	s.State = fsmpb.SessionState_SESSION_STATE_STOPPED
	s.StopReason = reason
	s.UpdatedUnixNano, s.StoppedUnixNano = c.TimeUnixNano, c.TimeUnixNano
	a.putEvents(newEvent(s, c, KindSessionStopped, reason, fact(stopFact{Child: childID, Source: cmd.Source})))
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Boundary{Boundary: &fsmpb.Boundary{
		Action: cmd.Source, Session: child, PreviousSession: s.SessionId}}}, nil
}

// childOf builds a child session of s (clear, new or fork) sharing s's
// envelope and placement, and records the lineage edge.
func (a *applier) childOf(c *fsmpb.Command, s *fsmpb.Session, id, source, provider, providerSessionID string, at uint64) *fsmpb.Session {
	child := &fsmpb.Session{
		SessionId: id, State: fsmpb.SessionState_SESSION_STATE_ACTIVE,
		CreatedUnixNano: c.TimeUnixNano, UpdatedUnixNano: c.TimeUnixNano,
		Epoch: 1, Placement: proto.Clone(s.Placement).(*fsmpb.Placement),
		EnvelopeId: s.EnvelopeId, ContextCap: s.ContextCap,
		Provider: provider, ProviderSessionId: providerSessionID,
		ParentSession: s.SessionId, ForkAddress: at, BoundarySource: source,
		RecoverManual: s.RecoverManual,
	}
	if child.Provider == "" {
		child.Provider = s.Provider
	}
	if env := a.loadEnvelope(s.EnvelopeId); env != nil {
		env.Sessions++
		a.putEnvelope(env)
	}
	edge, err := proto.Marshal(&fsmpb.LineageEdge{Parent: s.SessionId, Child: id, Source: source, AtSeq: at, TimeUnixNano: c.TimeUnixNano})
	if err != nil {
		panic("fsm: marshal lineage: " + err.Error())
	}
	a.must(a.lineage.Put(attachmentKey(s.SessionId, id), edge))
	return child
}

// forkSession copies the source's history up to an address into a new
// session of the same envelope. The source is untouched and keeps running;
// queued inputs and pending turn state are not inherited.
func (a *applier) forkSession(c *fsmpb.Command, cmd *fsmpb.ForkSession) (*fsmpb.Result, *Error) {
	if err := validSessionID(cmd.ForkSessionId); err != nil {
		return nil, err
	}
	if len(cmd.ProviderSessionId) > MaxSessionIDBytes {
		return nil, errorf(ReasonInvalidArgument, "provider session id longer than %d bytes", MaxSessionIDBytes)
	}
	s, err := a.loadSession(cmd.SourceSessionId)
	if err != nil {
		return nil, err
	}
	if child, cerr := a.loadSession(cmd.ForkSessionId); cerr == nil {
		if child.ParentSession == s.SessionId && child.BoundarySource == "fork" {
			return &fsmpb.Result{NoOp: true, Body: &fsmpb.Result_Boundary{Boundary: &fsmpb.Boundary{
				Action: "no_op", Session: child, PreviousSession: s.SessionId}}}, nil
		}
		return nil, errorf(ReasonAlreadyExists, "session %s already exists", cmd.ForkSessionId)
	}
	at := cmd.AtSeq
	if at == 0 {
		at = s.HeadSeq
	}
	if at > s.HeadSeq {
		return nil, errorf(ReasonInvalidArgument, "fork address #%d is past the head #%d", at, s.HeadSeq)
	}
	child := a.childOf(c, s, cmd.ForkSessionId, "fork", s.Provider, cmd.ProviderSessionId, at)
	child.Title, child.Objective = s.Title, s.Objective
	copied, ferr := a.copyJournal(s.SessionId, child, at)
	if ferr != nil {
		return nil, ferr
	}
	a.putEvents(newEvent(child, c, KindSessionForked, "forked from "+s.SessionId, fact(forkFact{
		Source: s.SessionId, ForkAddress: at, Copied: copied,
	})))
	a.putSession(child)
	return &fsmpb.Result{Body: &fsmpb.Result_Boundary{Boundary: &fsmpb.Boundary{
		Action: "fork", Session: child, PreviousSession: s.SessionId}}}, nil
}

// copyJournal copies events 1..at of src into child (same seqs, same
// kinds, times and texts), so the fork's addresses up to the fork point
// are the source's.
func (a *applier) copyJournal(src string, child *fsmpb.Session, at uint64) (int, *Error) {
	// Collect first: bbolt cursors must not run across writes to their bucket.
	var chunks [][]*fsmpb.Event
	prefix := append([]byte(src), 0)
	cur := a.journal.Cursor()
	for k, v := cur.Seek(journalKey(src, 1)); k != nil && len(k) == len(prefix)+8 && string(k[:len(prefix)]) == string(prefix); k, v = cur.Next() {
		var chunk fsmpb.EventChunk
		if err := proto.Unmarshal(v, &chunk); err != nil {
			panic("fsm: corrupt journal chunk: " + err.Error())
		}
		var out []*fsmpb.Event
		for _, e := range chunk.Events {
			if e.Seq > at {
				break
			}
			ce := proto.Clone(e).(*fsmpb.Event)
			ce.SessionId = child.SessionId
			out = append(out, ce)
		}
		if len(out) == 0 {
			break
		}
		chunks = append(chunks, out)
	}
	n := 0
	for _, out := range chunks {
		a.putEvents(out...)
		child.HeadSeq = out[len(out)-1].Seq
		n += len(out)
	}
	return n, nil
}

// followToChild moves every launch whose default session was parent to the
// child, so usage without a trace id charges the child at once, whoever
// asked for the clear (a hook or a person). Launches are few; the scan is in
// key order, so replicas agree.
func (a *applier) followToChild(c *fsmpb.Command, parent, child string) {
	var moved []*fsmpb.Launch
	cur := a.launches.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		var l fsmpb.Launch
		if err := proto.Unmarshal(v, &l); err != nil {
			panic("fsm: corrupt launch: " + err.Error())
		}
		if l.DefaultSession == parent {
			l.DefaultSession = child
			l.UpdatedUnixNano = c.TimeUnixNano
			moved = append(moved, &l)
		}
	}
	for _, l := range moved {
		a.putLaunch(l)
	}
}
