package guard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

// stateFile in the run directory records the provider session id and the
// fak session the launch is bound to now (the FSM's launch record is the
// authority; this is the adapter-side memory, for inspection).
const stateFile = "state.json"

// launch is the guard's side of one guarded launch: it turns hook requests
// into LifecycleService calls, one at a time, in arrival order.
type launch struct {
	client   fakv1connect.LifecycleServiceClient
	launchID string
	provider string
	runDir   string
	// rpcTimeout bounds the cluster call for one hook, inside the hook's
	// own budget.
	rpcTimeout time.Duration

	turn chan struct{} // one hook at a time
	mu   sync.Mutex
	// session is the launch's session as of the last reply; it is part of
	// each request id, so a redelivery that follows a boundary reaches the
	// FSM (which makes it a no-op) instead of replaying an older result.
	session         string
	providerSession string
}

func newLaunch(client fakv1connect.LifecycleServiceClient, launchID, provider, session, runDir string, hookBudget time.Duration) *launch {
	return &launch{client: client, launchID: launchID, provider: provider, runDir: runDir,
		rpcTimeout: hookBudget * 3 / 4, session: session, turn: make(chan struct{}, 1)}
}

// handle serves one authenticated hook request.
func (l *launch) handle(ctx context.Context, req Request) Reply {
	h, err := ParseHook(req.Event, req.Payload)
	if err != nil {
		return Reply{Error: err.Error()}
	}
	provider := req.Provider
	if provider == "" {
		provider = l.provider
	}
	ctx, cancel := context.WithTimeout(ctx, l.rpcTimeout)
	defer cancel()
	select {
	case l.turn <- struct{}{}:
		defer func() { <-l.turn }()
	case <-ctx.Done():
		return Reply{Error: "busy with an earlier hook"}
	}
	l.mu.Lock()
	current := l.session
	l.mu.Unlock()
	reqID := hookRequestID(l.launchID, h, current)

	var b *fakv1.Boundary
	switch h.Event {
	case EventSessionStart:
		resp, err := l.client.ProviderSessionStart(ctx, connect.NewRequest(&fakv1.ProviderSessionStartRequest{
			LaunchId: l.launchID, Provider: provider, Source: h.Source,
			ProviderSessionId: h.ProviderSessionID, MetadataJson: h.Metadata, RequestId: reqID,
		}))
		if err != nil {
			return Reply{Error: rpcErrorText(err)}
		}
		b = resp.Msg.GetBoundary()
	case EventSessionEnd:
		resp, err := l.client.ProviderSessionEnd(ctx, connect.NewRequest(&fakv1.ProviderSessionEndRequest{
			LaunchId: l.launchID, Provider: provider, Reason: h.Reason,
			ProviderSessionId: h.ProviderSessionID, MetadataJson: h.Metadata, RequestId: reqID,
		}))
		if err != nil {
			return Reply{Error: rpcErrorText(err)}
		}
		b = resp.Msg.GetBoundary()
	}
	session := b.GetSession().GetSessionId()
	l.mu.Lock()
	if session != "" {
		l.session = session
	}
	if h.Event == EventSessionStart {
		l.providerSession = h.ProviderSessionID
	}
	l.writeState()
	l.mu.Unlock()
	return Reply{OK: true, Action: b.GetAction(), SessionID: session, PreviousSessionID: b.GetPreviousSessionId()}
}

// hookRequestID derives the RPC's request id from the hook, so a retried
// or redelivered hook is idempotent at the RPC layer as well as in the FSM.
func hookRequestID(launchID string, h Hook, session string) string {
	what := h.Source
	if h.Event == EventSessionEnd {
		what = h.Reason
	}
	sum := sha256.Sum256([]byte(launchID + "\x00" + h.Event + "\x00" + what + "\x00" + h.ProviderSessionID + "\x00" + session))
	return "req_hook_" + hex.EncodeToString(sum[:16])
}

func (l *launch) writeState() {
	b, _ := json.Marshal(map[string]string{
		"launch_id": l.launchID, "provider": l.provider,
		"provider_session_id": l.providerSession, "session_id": l.session,
	})
	tmp := filepath.Join(l.runDir, stateFile+".tmp")
	if os.WriteFile(tmp, b, 0o600) == nil {
		os.Rename(tmp, filepath.Join(l.runDir, stateFile))
	}
}

// rpcErrorText is a short description of a cluster error: its reason when
// the server gave one, else its code and message.
func rpcErrorText(err error) string {
	const late = "the fak cluster did not answer in time"
	var ce *connect.Error
	if !errors.As(err, &ce) {
		if errors.Is(err, context.DeadlineExceeded) {
			return late
		}
		return "fak cluster: " + err.Error()
	}
	if ce.Code() == connect.CodeDeadlineExceeded {
		return late
	}
	if info := apiclient.ErrorInfo(err); info != nil && info.GetReason() != "" {
		return "fak cluster: " + info.GetReason() + ": " + ce.Message()
	}
	if ce.Code() == connect.CodeUnavailable || ce.Code() == connect.CodeUnknown {
		return "fak cluster unreachable: " + ce.Message()
	}
	return "fak cluster: " + ce.Code().String() + ": " + ce.Message()
}
