package api

import (
	"context"
	"fmt"
	"strconv"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// WorkspaceStore is what a node serves of the workspace snapshots its
// store holds (node/workspace.Store): a manifest by digest, a chunk by
// hash, each verified as it is read.
type WorkspaceStore interface {
	ManifestBytes(digest string) ([]byte, error)
	Get(hash string) ([]byte, error)
}

// maxChunksPerFetch bounds one FetchWorkspaceChunks request; a
// destination asks again for the rest (and after a broken stream, for
// what it still lacks).
const maxChunksPerFetch = 4096

// GetWorkspaceManifest answers a manifest this node's store holds: a
// move's destination asks the source for the workspace it checkpointed.
func (h *runnerHandler) GetWorkspaceManifest(ctx context.Context, req *connect.Request[fakv1.GetWorkspaceManifestRequest]) (*connect.Response[fakv1.GetWorkspaceManifestResponse], error) {
	if h.s.cfg.Workspaces == nil {
		return nil, toConnectError(&fsm.Error{Reason: fsm.ReasonNotFound, Message: "node " + h.s.cfg.NodeName + " keeps no workspaces"})
	}
	d := req.Msg.Digest
	if d == "" || len(d) > fsm.MaxWorkspaceDigestBytes {
		return nil, invalidArgument("digest is required (at most %d bytes)", fsm.MaxWorkspaceDigestBytes)
	}
	b, err := h.s.cfg.Workspaces.ManifestBytes(d)
	if err != nil {
		return nil, toConnectError(&fsm.Error{Reason: fsm.ReasonNotFound, Message: fmt.Sprintf("workspace %s on %s: %v", d, h.s.cfg.NodeName, err)})
	}
	return connect.NewResponse(&fakv1.GetWorkspaceManifestResponse{Manifest: b}), nil
}

// FetchWorkspaceChunks streams the chunks asked for, in order. A chunk
// this node lacks (or finds altered) ends the stream NOT_FOUND naming it:
// what was sent before stands, and the destination knows what is missing.
func (h *runnerHandler) FetchWorkspaceChunks(ctx context.Context, req *connect.Request[fakv1.FetchWorkspaceChunksRequest], stream *connect.ServerStream[fakv1.FetchWorkspaceChunksResponse]) error {
	if h.s.cfg.Workspaces == nil {
		return toConnectError(&fsm.Error{Reason: fsm.ReasonNotFound, Message: "node " + h.s.cfg.NodeName + " keeps no workspaces"})
	}
	if n := len(req.Msg.Hashes); n > maxChunksPerFetch {
		return invalidArgument("%d chunks in one fetch; the limit is %d", n, maxChunksPerFetch)
	}
	for _, hash := range req.Msg.Hashes {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := h.s.cfg.Workspaces.Get(hash)
		if err != nil {
			return toConnectError(&fsm.Error{Reason: fsm.ReasonNotFound, Message: fmt.Sprintf("chunk %s on %s: %v", hash, h.s.cfg.NodeName, err)})
		}
		if err := stream.Send(&fakv1.FetchWorkspaceChunksResponse{Hash: hash, Data: data}); err != nil {
			return err
		}
	}
	return nil
}

// CopyWorkspace makes this node hold a copy of a session's workspace,
// read from its host's store: a recovery restores from it.
func (h *runnerHandler) CopyWorkspace(ctx context.Context, req *connect.Request[fakv1.CopyWorkspaceRequest]) (*connect.Response[fakv1.CopyWorkspaceResponse], error) {
	m := req.Msg
	if h.s.cfg.CopyWorkspace == nil {
		return nil, toConnectError(&fsm.Error{Reason: fsm.ReasonNotFound, Message: "node " + h.s.cfg.NodeName + " keeps no workspace copies"})
	}
	if m.SessionId == "" || m.Digest == "" || len(m.Digest) > fsm.MaxWorkspaceDigestBytes || m.FromNode == "" {
		return nil, invalidArgument("session_id, digest (at most %d bytes) and from_node are required", fsm.MaxWorkspaceDigestBytes)
	}
	t, err := h.s.cfg.CopyWorkspace(ctx, m.SessionId, m.Digest, m.FromNode)
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&fakv1.CopyWorkspaceResponse{BytesSent: t.BytesSent, BytesPresent: t.BytesPresent,
		ChunksSent: t.ChunksSent, ChunksPresent: t.ChunksPresent, FetchNanos: t.FetchNanos}), nil
}

// RecordWorkspaceCopy records, fenced by the host's epoch, that a node
// holds a copy of the session's workspace.
func (h *runnerHandler) RecordWorkspaceCopy(ctx context.Context, req *connect.Request[fakv1.RecordWorkspaceCopyRequest]) (*connect.Response[fakv1.RecordWorkspaceCopyResponse], error) {
	m := req.Msg
	if m.SessionId == "" || m.Epoch == 0 || m.Node == "" || m.Digest == "" {
		return nil, invalidArgument("session_id, epoch, node and digest are required")
	}
	id := moveStepID("workspace-copy", m.SessionId, strconv.FormatUint(m.Epoch, 10), m.Node, m.Digest, strconv.FormatUint(m.AfterInput, 10))
	return write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: id, Body: &fsmpb.Command_RecordWorkspaceCopy{RecordWorkspaceCopy: &fsmpb.RecordWorkspaceCopy{
				SessionId: m.SessionId, Epoch: m.Epoch, Copy: &fsmpb.WorkspaceCopy{
					Workspace: &fsmpb.Workspace{Digest: m.Digest, Bytes: m.Bytes, Chunks: m.Chunks},
					Node:      m.Node, AfterInput: m.AfterInput, TurnsCompleted: m.TurnsCompleted,
					Transfer: TransferFromAPI(m.Transfer), CopyNanos: m.CopyNanos,
				}}}}
		},
		func(*fsmpb.Result) *fakv1.RecordWorkspaceCopyResponse { return &fakv1.RecordWorkspaceCopyResponse{} },
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.RecordWorkspaceCopyRequest]) (*connect.Response[fakv1.RecordWorkspaceCopyResponse], error) {
			return p.runner.RecordWorkspaceCopy(ctx, r)
		})
}
