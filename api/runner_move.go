package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The runners' move steps (DESIGN.md §8): the source runner's checkpoint,
// the destination runner's restore, a runner's report that a move cannot
// proceed. Like AppendRunnerEvents they are written on the leader, a
// follower forwarding the same request.
//
// The requests carry no request id: each step's id is derived from its
// content, so every retry of one step — by the runner, by a forwarding
// follower, across an election — proposes the same command and the FSM
// answers a replay with the first outcome. A step's content names one move
// and a state it can be taken from only once, so equal content never
// means a second intended step.

// moveStepID derives the request id of a runner's move step.
func moveStepID(step string, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(step))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return "mvstep_" + step + "_" + hex.EncodeToString(h.Sum(nil))[:40]
}

func validMoveStep(sessionID, moveID string) error {
	if sessionID == "" || moveID == "" {
		return invalidArgument("session_id and move_id are required")
	}
	if len(moveID) > fsm.MaxSessionIDBytes {
		return invalidArgument("move_id longer than %d bytes", fsm.MaxSessionIDBytes)
	}
	return nil
}

func (h *runnerHandler) CommitCheckpoint(ctx context.Context, req *connect.Request[fakv1.CommitCheckpointRequest]) (*connect.Response[fakv1.CommitCheckpointResponse], error) {
	m := req.Msg
	if err := validMoveStep(m.SessionId, m.MoveId); err != nil {
		return nil, err
	}
	if m.SourceEpoch == 0 || m.CheckpointSeq == 0 || m.Digest == "" {
		return nil, invalidArgument("source_epoch, checkpoint_seq and digest are required")
	}
	if len(m.WorkspaceDigest) > fsm.MaxWorkspaceDigestBytes {
		return nil, invalidArgument("workspace_digest longer than %d bytes", fsm.MaxWorkspaceDigestBytes)
	}
	parts := []string{m.SessionId, m.MoveId, strconv.FormatUint(m.SourceEpoch, 10), strconv.FormatUint(m.CheckpointSeq, 10), m.Digest}
	if m.WorkspaceDigest != "" {
		parts = append(parts, m.WorkspaceDigest)
	}
	id := moveStepID("checkpoint", parts...)
	return write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: id, Body: &fsmpb.Command_MoveCheckpoint{MoveCheckpoint: &fsmpb.MoveCheckpoint{
				SessionId: m.SessionId, MoveId: m.MoveId, SourceEpoch: m.SourceEpoch,
				CheckpointSeq: m.CheckpointSeq, Digest: m.Digest, Workspace: workspaceOf(m),
			}}}
		},
		func(r *fsmpb.Result) *fakv1.CommitCheckpointResponse {
			return &fakv1.CommitCheckpointResponse{HeadSeq: r.GetSession().GetHeadSeq()}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.CommitCheckpointRequest]) (*connect.Response[fakv1.CommitCheckpointResponse], error) {
			return p.runner.CommitCheckpoint(ctx, r)
		})
}

func (h *runnerHandler) CommitRestore(ctx context.Context, req *connect.Request[fakv1.CommitRestoreRequest]) (*connect.Response[fakv1.CommitRestoreResponse], error) {
	m := req.Msg
	if err := validMoveStep(m.SessionId, m.MoveId); err != nil {
		return nil, err
	}
	if m.NewEpoch == 0 || m.Digest == "" {
		return nil, invalidArgument("new_epoch and digest are required")
	}
	id := moveStepID("restore", m.SessionId, m.MoveId, strconv.FormatUint(m.NewEpoch, 10), m.Digest)
	return write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: id, Body: &fsmpb.Command_MoveRestore{MoveRestore: &fsmpb.MoveRestore{
				SessionId: m.SessionId, MoveId: m.MoveId, NewEpoch: m.NewEpoch, Digest: m.Digest,
				Transfer: TransferFromAPI(m.Transfer),
			}}}
		},
		func(r *fsmpb.Result) *fakv1.CommitRestoreResponse {
			return &fakv1.CommitRestoreResponse{HeadSeq: r.GetSession().GetHeadSeq()}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.CommitRestoreRequest]) (*connect.Response[fakv1.CommitRestoreResponse], error) {
			return p.runner.CommitRestore(ctx, r)
		})
}

func (h *runnerHandler) FailMove(ctx context.Context, req *connect.Request[fakv1.FailMoveRequest]) (*connect.Response[fakv1.FailMoveResponse], error) {
	m := req.Msg
	if err := validMoveStep(m.SessionId, m.MoveId); err != nil {
		return nil, err
	}
	if m.Reason == "" || len(m.Reason) > fsm.MaxReasonBytes {
		return nil, invalidArgument("reason must be 1-%d bytes", fsm.MaxReasonBytes)
	}
	id := moveStepID("fail", m.SessionId, m.MoveId)
	return write(ctx, h.s, req, m.SessionId,
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: id, Body: &fsmpb.Command_MoveFail{MoveFail: &fsmpb.MoveFail{
				SessionId: m.SessionId, MoveId: m.MoveId, Reason: m.Reason, Unsafe: m.Unsafe,
			}}}
		},
		func(r *fsmpb.Result) *fakv1.FailMoveResponse {
			return &fakv1.FailMoveResponse{HeadSeq: r.GetSession().GetHeadSeq()}
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.FailMoveRequest]) (*connect.Response[fakv1.FailMoveResponse], error) {
			return p.runner.FailMove(ctx, r)
		})
}

// workspaceOf is a checkpoint's workspace (nil: none carried).
func workspaceOf(m *fakv1.CommitCheckpointRequest) *fsmpb.Workspace {
	if m.WorkspaceDigest == "" {
		return nil
	}
	return &fsmpb.Workspace{Digest: m.WorkspaceDigest, Bytes: m.WorkspaceBytes, Chunks: m.WorkspaceChunks,
		SnapshotNanos: m.WorkspaceSnapshotMs * int64(time.Millisecond)}
}

// TransferFromAPI is the FSM's form of a workspace transfer (nil: none).
func TransferFromAPI(t *fakv1.WorkspaceTransfer) *fsmpb.WorkspaceTransfer {
	if t == nil {
		return nil
	}
	return &fsmpb.WorkspaceTransfer{BytesSent: t.BytesSent, BytesPresent: t.BytesPresent, ChunksSent: t.ChunksSent,
		ChunksPresent: t.ChunksPresent, FetchNanos: t.FetchMs * int64(time.Millisecond), RestoreNanos: t.RestoreMs * int64(time.Millisecond)}
}

// TransferToAPI is the API's form of a workspace transfer (nil: none).
func TransferToAPI(t *fsmpb.WorkspaceTransfer) *fakv1.WorkspaceTransfer {
	if t == nil {
		return nil
	}
	return &fakv1.WorkspaceTransfer{BytesSent: t.BytesSent, BytesPresent: t.BytesPresent, ChunksSent: t.ChunksSent,
		ChunksPresent: t.ChunksPresent, FetchMs: time.Duration(t.FetchNanos).Milliseconds(), RestoreMs: time.Duration(t.RestoreNanos).Milliseconds()}
}
