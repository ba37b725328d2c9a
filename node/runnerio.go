package node

import (
	"context"
	"crypto/tls"
	"errors"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api"
	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
)

// apiWriter is the runner's way into the cluster: the public API of its own
// node, so a follower's runner is forwarded to the leader exactly like any
// client write and the same auth, limits and idempotency apply.
type apiWriter struct {
	http      *http.Client
	runner    fakv1connect.RunnerServiceClient
	sessions  fakv1connect.SessionServiceClient
	lifecycle fakv1connect.LifecycleServiceClient
}

// With tlsCfg (the node's peer client configuration) the writer reaches
// its own API over mutual TLS, as a peer would.
func newAPIWriter(apiAddr string, token func() string, tlsCfg *tls.Config) *apiWriter {
	hc, base, opts := nodeClient(apiAddr, token, tlsCfg)
	return &apiWriter{
		http:      hc,
		runner:    fakv1connect.NewRunnerServiceClient(hc, base, opts...),
		sessions:  fakv1connect.NewSessionServiceClient(hc, base, opts...),
		lifecycle: fakv1connect.NewLifecycleServiceClient(hc, base, opts...),
	}
}

// nodeClient is how this node calls a node's API (its own, or a peer's):
// an HTTP client with the node's peer TLS, the base URL of addr, and the
// node's own token as it is at each call.
func nodeClient(addr string, token func() string, tlsCfg *tls.Config) (*http.Client, string, []connect.ClientOption) {
	opts := []connect.ClientOption{connect.WithInterceptors(apiclient.BearerFunc(token))}
	return apiclient.NewTLSHTTPClient(tlsCfg, nil), apiclient.Scheme(tlsCfg != nil) + "://" + addr, opts
}

// close drops the writer's connections once the runner has stopped.
func (w *apiWriter) close() { w.http.CloseIdleConnections() }

// localAddr turns a bound listener address into one this process can dial:
// a wildcard bind (0.0.0.0, ::) is reached on loopback.
func localAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return a.String()
	}
	loop := net.IPv4(127, 0, 0, 1)
	if tcp.IP.To4() == nil {
		loop = net.IPv6loopback
	}
	return net.JoinHostPort(loop.String(), strconv.Itoa(tcp.Port))
}

func (w *apiWriter) AppendRunnerEvents(ctx context.Context, a runner.Append) (runner.Appended, error) {
	req := &fakv1.AppendRunnerEventsRequest{SessionId: a.SessionID, Epoch: a.Epoch, RequestId: a.RequestID, ChargeTurn: a.ChargeTurn,
		StartsInput: a.StartsInput, TurnOnly: a.TurnOnly}
	if a.Binding != nil {
		req.BindingProvider, req.BindingThreadId = a.Binding.Provider, a.Binding.ThreadID
	}
	if a.Usage != nil {
		req.Usage = api.BudgetToAPI(a.Usage)
	}
	for _, ev := range a.Events {
		req.Events = append(req.Events, &fakv1.EventInput{Kind: ev.Kind, Text: ev.Text, Data: ev.Data})
	}
	resp, err := w.runner.AppendRunnerEvents(ctx, connect.NewRequest(req))
	if err != nil {
		return runner.Appended{}, classify(err)
	}
	m := resp.Msg
	return runner.Appended{First: m.FirstSeq, Last: m.LastSeq, TurnRefused: m.TurnRefused, UsageRefused: m.UsageRefused}, nil
}

// CommitCheckpoint, CommitRestore and FailMove are the runner's move steps
// (RunnerService). Their request ids are derived from their content by the
// API, so a retry of the same step is deduplicated by the FSM.
func (w *apiWriter) CommitCheckpoint(ctx context.Context, sessionID, moveID string, sourceEpoch, seq uint64, digest string, ws *fsmpb.Workspace) (uint64, error) {
	resp, err := w.runner.CommitCheckpoint(ctx, connect.NewRequest(&fakv1.CommitCheckpointRequest{
		SessionId: sessionID, MoveId: moveID, SourceEpoch: sourceEpoch, CheckpointSeq: seq, Digest: digest,
		WorkspaceDigest: ws.GetDigest(), WorkspaceBytes: ws.GetBytes(), WorkspaceChunks: ws.GetChunks(),
		WorkspaceSnapshotMs: time.Duration(ws.GetSnapshotNanos()).Milliseconds(),
	}))
	if err != nil {
		return 0, classify(err)
	}
	return resp.Msg.HeadSeq, nil
}

func (w *apiWriter) RecordWorkspaceCopy(ctx context.Context, sessionID string, epoch uint64, cp *fsmpb.WorkspaceCopy) error {
	_, err := w.runner.RecordWorkspaceCopy(ctx, connect.NewRequest(&fakv1.RecordWorkspaceCopyRequest{
		SessionId: sessionID, Epoch: epoch, Node: cp.Node, Digest: cp.Workspace.GetDigest(), Bytes: cp.Workspace.GetBytes(),
		Chunks: cp.Workspace.GetChunks(), AfterInput: cp.AfterInput, TurnsCompleted: cp.TurnsCompleted,
		Transfer: api.TransferToAPI(cp.Transfer), CopyNanos: cp.CopyNanos,
	}))
	return classify(err)
}

func (w *apiWriter) CommitRestore(ctx context.Context, sessionID, moveID string, newEpoch uint64, digest string, t *fsmpb.WorkspaceTransfer) (uint64, error) {
	resp, err := w.runner.CommitRestore(ctx, connect.NewRequest(&fakv1.CommitRestoreRequest{
		SessionId: sessionID, MoveId: moveID, NewEpoch: newEpoch, Digest: digest, Transfer: api.TransferToAPI(t),
	}))
	if err != nil {
		return 0, classify(err)
	}
	return resp.Msg.HeadSeq, nil
}

func (w *apiWriter) FailMove(ctx context.Context, sessionID, moveID, reason string) (uint64, error) {
	resp, err := w.runner.FailMove(ctx, connect.NewRequest(&fakv1.FailMoveRequest{
		SessionId: sessionID, MoveId: moveID, Reason: reason,
	}))
	if err != nil {
		return 0, classify(err)
	}
	return resp.Msg.HeadSeq, nil
}

// RecordUsage charges a turn's usage to the session's budget envelope, as
// a gateway would after a model call.
func (w *apiWriter) RecordUsage(ctx context.Context, sessionID string, usage *fsmpb.Budget, requestID string) error {
	_, err := w.lifecycle.RecordUsage(ctx, connect.NewRequest(&fakv1.RecordUsageRequest{
		SessionId: sessionID, RequestId: requestID,
		Usage: api.BudgetToAPI(usage),
	}))
	return classify(err)
}

// Sync is a linearizable read of the session through the node's own API:
// when it returns, this node's replica has applied the leader's read index.
// Reading from past the head keeps the answer empty.
func (w *apiWriter) Sync(ctx context.Context, sessionID string) error {
	_, err := w.sessions.ReadEvents(ctx, connect.NewRequest(&fakv1.ReadEventsRequest{
		SessionId: sessionID, FromSeq: math.MaxUint64, Limit: 1,
		Consistency: fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE,
	}))
	return classify(err)
}

// classify turns an API error back into what the runner acts on: the
// domain error the FSM produced (STALE_EPOCH, TURN_ORDER, ...), or a
// transient failure worth retrying under the same request id: no leader,
// an outcome lost with a leader, the node shutting down, too many of this
// node's own calls in flight, a broken connection.
func classify(err error) error {
	if err == nil {
		return nil
	}
	info := apiclient.ErrorInfo(err)
	if info != nil {
		switch info.Reason {
		case api.ReasonNotLeader, api.ReasonNoLeader, api.ReasonIndeterminate, api.ReasonShuttingDown, api.ReasonTooManyCalls:
			return runner.Transient(err)
		}
		return &fsm.Error{Reason: fsm.Reason(info.Reason), Message: err.Error(), HeadSeq: info.HeadSeq}
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeCanceled, connect.CodeUnknown, connect.CodeInternal:
		return runner.Transient(err)
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return runner.Transient(err) // not even an HTTP answer
	}
	return err
}
