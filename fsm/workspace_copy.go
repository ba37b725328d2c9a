package fsm

import (
	"fmt"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Workspace copies (DESIGN.md §8): after a completed turn the host ships
// the session's workspace to one other node and records it here, fenced
// by its epoch; only the newest copy is kept. A recovery, whose source is
// gone, restores the workspace from it and says what that copy lacks; with
// no copy the session starts with an empty workspace, and says so. A
// move's cutover records the source as holding the workspace it sent.

func (a *applier) recordWorkspaceCopy(c *fsmpb.Command, cmd *fsmpb.RecordWorkspaceCopy) (*fsmpb.Result, *Error) {
	cp := cmd.Copy
	if cp == nil || cp.Workspace.GetDigest() == "" || len(cp.Workspace.GetDigest()) > MaxWorkspaceDigestBytes ||
		cp.Node == "" || len(cp.Node) > MaxPlacementFieldBytes {
		return nil, errorf(ReasonInvalidArgument, "a workspace copy names its digest (at most %d bytes) and the node holding it", MaxWorkspaceDigestBytes)
	}
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	if err := checkEpoch(s, cmd.Epoch, "workspace copy of"); err != nil {
		return nil, err
	}
	if err := activeSession(s); err != nil {
		return nil, err
	}
	if old := s.WorkspaceCopy; old != nil && old.Epoch == cmd.Epoch && old.AfterInput > cp.AfterInput {
		// A slow ship of an older turn does not replace a newer copy.
		return &fsmpb.Result{Body: &fsmpb.Result_Session{Session: s}}, nil
	}
	s.WorkspaceCopy = &fsmpb.WorkspaceCopy{
		Workspace: &fsmpb.Workspace{Digest: cp.Workspace.Digest, Bytes: cp.Workspace.Bytes, Chunks: cp.Workspace.Chunks},
		Node:      cp.Node, Epoch: cmd.Epoch, AfterInput: cp.AfterInput, TurnsCompleted: cp.TurnsCompleted,
		CopyNanos: max(cp.CopyNanos, 0),
	}
	if t := cp.Transfer; t != nil {
		s.WorkspaceCopy.Transfer = &fsmpb.WorkspaceTransfer{BytesSent: t.BytesSent, BytesPresent: t.BytesPresent,
			ChunksSent: t.ChunksSent, ChunksPresent: t.ChunksPresent, FetchNanos: max(t.FetchNanos, 0)}
	}
	s.UpdatedUnixNano = c.TimeUnixNano
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Session{Session: s}}, nil
}

// recoveryWorkspace fixes what a recovery's checkpoint restores the
// workspace from, and the words of its journal entry.
func recoveryWorkspace(s *fsmpb.Session, m *fsmpb.Move) string {
	cp := s.WorkspaceCopy
	if cp == nil || cp.Node == m.SourceNode {
		m.Workspace, m.WorkspaceFrom, m.WorkspaceReset = nil, "", true
		return "; no copy of the workspace survives " + m.SourceNode + ": the session starts with an empty one"
	}
	m.Workspace = &fsmpb.Workspace{Digest: cp.Workspace.GetDigest(), Bytes: cp.Workspace.GetBytes(), Chunks: cp.Workspace.GetChunks()}
	m.WorkspaceFrom, m.WorkspaceReset = cp.Node, false
	text := fmt.Sprintf("; workspace restored from the copy on %s as of #%d (epoch %d)", cp.Node, cp.AfterInput, cp.Epoch)
	if lost := s.TurnsCompleted - min(cp.TurnsCompleted, s.TurnsCompleted); lost > 0 {
		text += fmt.Sprintf(": %d later turn(s)' changes were lost with %s", lost, m.SourceNode)
	}
	return text
}
