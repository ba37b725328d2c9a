package api

import (
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"time"
)

func sessionToAPI(s *fsmpb.Session) *fakv1.Session {
	if s == nil {
		return nil
	}
	return &fakv1.Session{
		SessionId:       s.SessionId,
		Title:           s.Title,
		Objective:       s.Objective,
		State:           fakv1.SessionState(s.State),
		StopReason:      s.StopReason,
		CreatedUnixNano: s.CreatedUnixNano,
		UpdatedUnixNano: s.UpdatedUnixNano,
		HeadSeq:         s.HeadSeq,
		Epoch:           s.Epoch,
		Placement:       placementToAPI(s.Placement),
		Lease:           leaseToAPI(s.Lease),
		Pending: &fakv1.PendingInteraction{
			QueuedInputs: s.QueuedInputs, TurnInputSeq: s.TurnInputSeq, ApprovalSeq: s.PendingApprovalSeq,
		},
		TurnsCompleted:  s.TurnsCompleted,
		AttachmentCount: s.Attachments,
		EnvelopeId:      s.EnvelopeId, ContextCap: s.ContextCap, ContextUsed: s.ContextUsed,
		Provider: s.Provider, ProviderSessionId: s.ProviderSessionId, ProviderThread: s.ProviderThread,
		ParentSession: s.ParentSession, ForkAddress: s.ForkAddress, BoundarySource: s.BoundarySource,
		ResetSeq: s.ResetSeq,
		Move:     moveToAPI(s.SessionId, s.Move), MovesCompleted: s.MovesCompleted,
		RecoverManual: s.RecoverManual, Stranded: s.Stranded, StrandedNode: s.StrandedNode,
		WorkspaceCopy: workspaceCopyToAPI(s.WorkspaceCopy),
	}
}

func workspaceCopyToAPI(cp *fsmpb.WorkspaceCopy) *fakv1.WorkspaceCopy {
	if cp == nil {
		return nil
	}
	return &fakv1.WorkspaceCopy{Node: cp.Node, Digest: cp.Workspace.GetDigest(), Bytes: cp.Workspace.GetBytes(),
		Chunks: cp.Workspace.GetChunks(), Epoch: cp.Epoch, AfterInput: cp.AfterInput, TurnsCompleted: cp.TurnsCompleted,
		Transfer: TransferToAPI(cp.Transfer), CopyNanos: cp.CopyNanos}
}

func placementToAPI(p *fsmpb.Placement) *fakv1.Placement {
	if p == nil {
		return nil
	}
	return &fakv1.Placement{RuntimeAdapter: p.RuntimeAdapter, Provider: p.Provider, AccountRef: p.AccountRef, Model: p.Model, Node: p.Node,
		LaunchId: p.LaunchId, Host: p.Host, Approvals: p.Approvals}
}

// placementFromAPI takes what a caller may choose: approvals are stamped
// by the FSM from the node records.
func placementFromAPI(p *fakv1.Placement) *fsmpb.Placement {
	if p == nil {
		return &fsmpb.Placement{}
	}
	return &fsmpb.Placement{RuntimeAdapter: p.RuntimeAdapter, Provider: p.Provider, AccountRef: p.AccountRef, Model: p.Model, Node: p.Node,
		LaunchId: p.LaunchId, Host: p.Host}
}

// leaseToAPI returns nil when nobody holds the lease.
func leaseToAPI(l *fsmpb.Lease) *fakv1.Lease {
	if l == nil || l.AttachmentId == "" {
		return nil
	}
	return &fakv1.Lease{AttachmentId: l.AttachmentId, ClientKind: l.ClientKind, ClientName: l.ClientName,
		TakenUnixNano: l.TakenUnixNano, ExpiresUnixNano: l.ExpiresUnixNano}
}

func attachmentToAPI(a *fsmpb.Attachment, now int64, lease *fsmpb.Lease) *fakv1.Attachment {
	return &fakv1.Attachment{
		AttachmentId: a.AttachmentId, ClientKind: a.ClientKind, ClientName: a.ClientName,
		Capabilities: a.Capabilities, Node: a.Node,
		JoinedUnixNano: a.JoinedUnixNano, SeenUnixNano: a.SeenUnixNano, ExpiresUnixNano: a.ExpiresUnixNano,
		Present:    a.ExpiresUnixNano > now,
		HoldsLease: lease != nil && lease.AttachmentId == a.AttachmentId && lease.ExpiresUnixNano > now,
	}
}

func eventToAPI(e *fsmpb.Event) *fakv1.Event {
	return &fakv1.Event{
		SessionId:    e.SessionId,
		Seq:          e.Seq,
		Kind:         e.Kind,
		TimeUnixNano: e.TimeUnixNano,
		Text:         e.Text,
		Data:         e.Data,
		RequestId:    e.RequestId,
	}
}

func eventsToAPI(in []*fsmpb.Event) []*fakv1.Event {
	out := make([]*fakv1.Event, len(in))
	for i, e := range in {
		out[i] = eventToAPI(e)
	}
	return out
}

func eventInputsFromAPI(in []*fakv1.EventInput) []*fsmpb.EventInput {
	out := make([]*fsmpb.EventInput, len(in))
	for i, e := range in {
		out[i] = &fsmpb.EventInput{Kind: e.Kind, Text: e.Text, Data: e.Data}
	}
	return out
}

func moveToAPI(sessionID string, m *fsmpb.Move) *fakv1.Move {
	if m == nil {
		return nil
	}
	return &fakv1.Move{
		MoveId: m.MoveId, SessionId: sessionID, State: m.State, Cause: m.Cause,
		Target: placementToAPI(m.Target), Admitted: placementToAPI(m.Admitted),
		SourceNode: m.SourceNode, SourceEpoch: m.SourceEpoch, CheckpointSeq: m.CheckpointSeq, Digest: m.Digest,
		NewEpoch: m.NewEpoch, Reason: m.Reason, Phase: m.Phase,
		RequestedUnixNano: m.RequestedUnixNano, StateUnixNano: m.StateUnixNano,
		Checks: m.Checks, Degradation: m.Degradation, AcceptDegradation: m.AcceptDegradation,
		WorkspaceDigest: m.Workspace.GetDigest(), WorkspaceBytes: m.Workspace.GetBytes(), WorkspaceChunks: m.Workspace.GetChunks(),
		WorkspaceSnapshotMs: time.Duration(m.Workspace.GetSnapshotNanos()).Milliseconds(), WorkspaceTransfer: TransferToAPI(m.Transfer),
		CacheLineage: cacheLineageToAPI(m.CacheLineage), WarmupNanos: m.WarmupNanos,
	}
}

func cacheLineageToAPI(l *fsmpb.CacheLineage) *fakv1.CacheLineage {
	if l == nil {
		return nil
	}
	return &fakv1.CacheLineage{ProviderThread: l.ProviderThread, Cache: l.Cache, Why: l.Why}
}

// AuditEntryToAPI converts an audit entry for clients.
func AuditEntryToAPI(e *fsmpb.AuditEntry) *fakv1.AuditEntry {
	return &fakv1.AuditEntry{
		Seq: e.Seq, TimeUnixNano: e.TimeUnixNano, Kind: e.Kind, SessionId: e.SessionId, Cause: e.Cause, By: e.By,
		Title: e.Title, Events: e.Events, Bytes: e.Bytes, StoppedUnixNano: e.StoppedUnixNano,
	}
}
