package api

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
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
