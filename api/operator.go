package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/cluster/snapshotfile"
)

// OperatorService: backups and Raft configuration changes, all served by
// the leader. A follower relays the call to the leader, streams included;
// a stream that broke after bytes went through is not retried (the caller
// starts over), one that never reached the leader is, like any write.
// VerifyReplay is the exception: each node checks its own replica
// (verify.go).

// Reasons of OperatorService errors.
const (
	ReasonInvalidSnapshot = "INVALID_SNAPSHOT"
	ReasonPeerIsLeader    = "PEER_IS_LEADER"
	ReasonPeerAlive       = "PEER_ALIVE"
)

// snapshotChunkBytes is the size of the chunks a snapshot file streams in.
const snapshotChunkBytes = 256 << 10

type operatorHandler struct {
	fakv1connect.UnimplementedOperatorServiceHandler
	s *Server
}

// operatorError maps cluster and snapshot-file errors to Connect errors.
func operatorError(err error) error {
	switch {
	case err == nil:
		return nil
	case snapshotfile.IsFormatError(err):
		return newError(connect.CodeInvalidArgument, &fakv1.ErrorInfo{Reason: ReasonInvalidSnapshot}, err.Error())
	case errors.Is(err, cluster.ErrPeerNotFound):
		return newError(connect.CodeNotFound, &fakv1.ErrorInfo{Reason: ReasonNotFound}, err.Error())
	case errors.Is(err, cluster.ErrRemoveLeader):
		return newError(connect.CodeFailedPrecondition, &fakv1.ErrorInfo{Reason: ReasonPeerIsLeader}, err.Error())
	case errors.Is(err, cluster.ErrPeerAlive):
		return newError(connect.CodeFailedPrecondition, &fakv1.ErrorInfo{Reason: ReasonPeerAlive}, err.Error())
	}
	return toConnectError(err)
}

// streamStarted marks an error after a stream's bytes began to flow: the
// call cannot be retried, so leaderCall must not (Aborted is not retryable).
func streamStarted(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() != connect.CodeUnavailable {
		return err
	}
	// %v, not %w: a wrapped ErrNotLeader would read as retryable again.
	return connect.NewError(connect.CodeAborted, fmt.Errorf("snapshot stream broke midway: %v", err))
}

func (h *operatorHandler) SnapshotSave(ctx context.Context, req *connect.Request[fakv1.SnapshotSaveRequest], stream *connect.ServerStream[fakv1.SnapshotSaveResponse]) error {
	out := &saveStream{stream: stream}
	_, err := leaderCall(ctx, h.s, req.Header(),
		func(ctx context.Context) (struct{}, error) {
			w := bufio.NewWriterSize(out, snapshotChunkBytes)
			meta, err := h.s.cluster.SaveSnapshot(ctx, w)
			if err == nil {
				err = w.Flush()
			}
			if err != nil && out.sent > 0 {
				return struct{}{}, streamStarted(err)
			}
			if err == nil {
				h.s.logger.Info("snapshot saved", "index", meta.Index, "bytes", out.sent)
			}
			return struct{}{}, err
		},
		func(ctx context.Context, p *peerClients) (struct{}, error) {
			fwd := connect.NewRequest(req.Msg)
			h.s.forwardHeaders(fwd.Header(), req.Header())
			remote, err := p.operator.SnapshotSave(ctx, fwd)
			if err != nil {
				return struct{}{}, err
			}
			defer remote.Close()
			for remote.Receive() {
				if _, err := out.Write(remote.Msg().GetData()); err != nil {
					return struct{}{}, streamStarted(err)
				}
			}
			if err := remote.Err(); err != nil {
				if out.sent > 0 {
					return struct{}{}, streamStarted(err)
				}
				return struct{}{}, err
			}
			return struct{}{}, nil
		})
	return operatorError(err)
}

// saveStream sends each write as one SnapshotSaveResponse (Send encodes
// the bytes before returning, so the caller may reuse them).
type saveStream struct {
	stream *connect.ServerStream[fakv1.SnapshotSaveResponse]
	sent   int64
}

func (w *saveStream) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if err := w.stream.Send(&fakv1.SnapshotSaveResponse{Data: p}); err != nil {
		return 0, err
	}
	w.sent += int64(len(p))
	return len(p), nil
}

func (h *operatorHandler) SnapshotRestore(ctx context.Context, stream *connect.ClientStream[fakv1.SnapshotRestoreRequest]) (*connect.Response[fakv1.SnapshotRestoreResponse], error) {
	in := &restoreStream{stream: stream}
	resp, err := leaderCall(ctx, h.s, stream.RequestHeader(),
		func(ctx context.Context) (*fakv1.SnapshotRestoreResponse, error) {
			meta, index, err := h.s.cluster.RestoreSnapshot(ctx, in)
			if err != nil {
				if in.started {
					return nil, streamStarted(operatorError(err))
				}
				return nil, err
			}
			return &fakv1.SnapshotRestoreResponse{Meta: apiclient.SnapshotMeta(meta), RestoredIndex: index}, nil
		},
		func(ctx context.Context, p *peerClients) (*fakv1.SnapshotRestoreResponse, error) {
			remote := p.operator.SnapshotRestore(ctx)
			h.s.forwardHeaders(remote.RequestHeader(), stream.RequestHeader())
			buf := make([]byte, snapshotChunkBytes)
			for {
				n, rerr := io.ReadFull(in, buf)
				if n > 0 {
					if err := remote.Send(&fakv1.SnapshotRestoreRequest{Data: buf[:n]}); err != nil {
						// The leader's answer says why it stopped reading.
						_, err = remote.CloseAndReceive()
						return nil, streamStarted(err)
					}
				}
				if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
					break
				}
				if rerr != nil {
					_, _ = remote.CloseAndReceive()
					return nil, streamStarted(rerr)
				}
			}
			r, err := remote.CloseAndReceive()
			if err != nil {
				return nil, streamStarted(err)
			}
			return r.Msg, nil
		})
	if err != nil {
		return nil, operatorError(err)
	}
	return connect.NewResponse(resp), nil
}

// restoreStream reads the bytes of a SnapshotRestore client stream.
type restoreStream struct {
	stream  *connect.ClientStream[fakv1.SnapshotRestoreRequest]
	buf     []byte
	err     error
	started bool
}

func (r *restoreStream) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.started = true
		if !r.stream.Receive() {
			r.err = r.stream.Err()
			if r.err == nil {
				r.err = io.EOF
			}
			continue
		}
		r.buf = r.stream.Msg().GetData()
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (h *operatorHandler) RaftRemovePeer(ctx context.Context, req *connect.Request[fakv1.RaftRemovePeerRequest]) (*connect.Response[fakv1.RaftRemovePeerResponse], error) {
	if req.Msg.GetId() == "" {
		return nil, invalidArgument("id is required")
	}
	resp, err := leaderCall(ctx, h.s, req.Header(),
		func(ctx context.Context) (*fakv1.RaftRemovePeerResponse, error) {
			return &fakv1.RaftRemovePeerResponse{}, h.s.cluster.RemovePeer(req.Msg.GetId())
		},
		func(ctx context.Context, p *peerClients) (*fakv1.RaftRemovePeerResponse, error) {
			return forwardOperator(ctx, h.s, p, req, fakv1connect.OperatorServiceClient.RaftRemovePeer)
		})
	if err != nil {
		return nil, operatorError(err)
	}
	return connect.NewResponse(resp), nil
}

func (h *operatorHandler) RaftTransferLeader(ctx context.Context, req *connect.Request[fakv1.RaftTransferLeaderRequest]) (*connect.Response[fakv1.RaftTransferLeaderResponse], error) {
	resp, err := leaderCall(ctx, h.s, req.Header(),
		func(ctx context.Context) (*fakv1.RaftTransferLeaderResponse, error) {
			leader, err := h.s.cluster.TransferLeadership(ctx, req.Msg.GetTo())
			if err != nil {
				return nil, err
			}
			return &fakv1.RaftTransferLeaderResponse{Leader: leader}, nil
		},
		func(ctx context.Context, p *peerClients) (*fakv1.RaftTransferLeaderResponse, error) {
			return forwardOperator(ctx, h.s, p, req, fakv1connect.OperatorServiceClient.RaftTransferLeader)
		})
	if err != nil {
		return nil, operatorError(err)
	}
	return connect.NewResponse(resp), nil
}

// forwardOperator sends a unary OperatorService request to the leader.
func forwardOperator[Req, Resp any](ctx context.Context, s *Server, p *peerClients, req *connect.Request[Req],
	call func(fakv1connect.OperatorServiceClient, context.Context, *connect.Request[Req]) (*connect.Response[Resp], error),
) (*Resp, error) {
	fwd := connect.NewRequest(req.Msg)
	s.forwardHeaders(fwd.Header(), req.Header())
	r, err := call(p.operator, ctx, fwd)
	if err != nil {
		return nil, err
	}
	return r.Msg, nil
}
