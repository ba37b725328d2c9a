package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

// apiClient talks to one agent through the Connect Go client.
type apiClient struct {
	session fakv1connect.SessionServiceClient
	cluster fakv1connect.ClusterServiceClient
}

// apiClients holds one apiClient per agent, sharing one h2c HTTP client.
type apiClients struct {
	httpClient *http.Client
	byName     map[string]apiClient
}

func newAPIClients(f *fleet) *apiClients {
	transport := &http.Transport{IdleConnTimeout: 90 * time.Second}
	transport.Protocols = new(http.Protocols)
	transport.Protocols.SetUnencryptedHTTP2(true)
	c := &apiClients{httpClient: &http.Client{Transport: transport}, byName: make(map[string]apiClient)}
	token := f.token
	auth := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+token)
			return next(ctx, req)
		}
	}))
	for _, a := range f.agents {
		base := "http://" + a.apiAddr
		c.byName[a.name] = apiClient{
			session: fakv1connect.NewSessionServiceClient(c.httpClient, base, auth),
			cluster: fakv1connect.NewClusterServiceClient(c.httpClient, base, auth),
		}
	}
	f.t.Cleanup(transport.CloseIdleConnections)
	return c
}

func (c *apiClients) of(a *agent) apiClient { return c.byName[a.name] }

// nodeStatus asks agent a for its own Raft status.
func (c *apiClients) nodeStatus(ctx context.Context, a *agent) (*fakv1.NodeStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := c.of(a).cluster.Status(ctx, connect.NewRequest(&fakv1.StatusRequest{}))
	if err != nil {
		return nil, err
	}
	if len(resp.Msg.GetNodes()) != 1 {
		return nil, fmt.Errorf("%s: status of %d nodes", a.name, len(resp.Msg.GetNodes()))
	}
	return resp.Msg.GetNodes()[0], nil
}

// statusAll asks agent a for the status of every member (all = true).
func (c *apiClients) statusAll(ctx context.Context, a *agent) (*fakv1.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := c.of(a).cluster.Status(ctx, connect.NewRequest(&fakv1.StatusRequest{All: true}))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// agreedLeader asks every agent in among for its own status and returns the
// leader all of them name (one of among, reporting itself Leader), together
// with each agent's status.
func (c *apiClients) agreedLeader(ctx context.Context, among []*agent) (leader *agent, statuses map[string]*fakv1.NodeStatus, why string) {
	statuses = make(map[string]*fakv1.NodeStatus)
	leaderID := ""
	for _, a := range among {
		st, err := c.nodeStatus(ctx, a)
		if err != nil {
			return nil, statuses, fmt.Sprintf("status of %s: %v", a.name, err)
		}
		statuses[a.name] = st
		switch {
		case st.GetLeaderId() == "":
			return nil, statuses, a.name + " knows no leader"
		case leaderID == "":
			leaderID = st.GetLeaderId()
		case st.GetLeaderId() != leaderID:
			return nil, statuses, fmt.Sprintf("leaders disagree: %s and %s", leaderID, st.GetLeaderId())
		}
	}
	for _, a := range among {
		if a.name == leaderID {
			if statuses[a.name].GetRaftState() != "Leader" {
				return nil, statuses, fmt.Sprintf("%s is named leader but is %s", leaderID, statuses[a.name].GetRaftState())
			}
			return a, statuses, ""
		}
	}
	return nil, statuses, fmt.Sprintf("leader %q is not among the expected nodes", leaderID)
}

// waitAgreedLeader waits until every agent in among names the same leader.
func (c *apiClients) waitAgreedLeader(f *fleet, among []*agent, timeout time.Duration) (*agent, map[string]*fakv1.NodeStatus) {
	f.t.Helper()
	var leader *agent
	var statuses map[string]*fakv1.NodeStatus
	f.waitFor(timeout, "a leader agreed on by all running nodes", func() (bool, string) {
		var why string
		leader, statuses, why = c.agreedLeader(context.Background(), among)
		return leader != nil, why
	})
	return leader, statuses
}

// ----- failover -----------------------------------------------------------

// appendCall is one AppendEvents call made by a failover writer.
type appendCall struct {
	requestID  string // also the event's text
	node       string
	start, end time.Time
	seq        uint64 // acknowledged seq; 0 when the call failed
	failure    string // reason or code of a failed call
	probe      bool   // made by the open-loop prober, not a writer
}

// appendLog collects every call of the writers.
type appendLog struct {
	mu    sync.Mutex
	calls []appendCall
}

func (l *appendLog) add(c appendCall) {
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
}

func (l *appendLog) snapshot() []appendCall { calls, _ := l.since(0); return calls }

// since returns a copy of the calls recorded from index i on, and the
// number of calls recorded so far.
func (l *appendLog) since(i int) ([]appendCall, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls[i:]), len(l.calls)
}

// failureReason is a short label for a failed call: the fak ErrorInfo
// reason when there is one, else the Connect code.
func failureReason(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err.Error()
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*fakv1.ErrorInfo); ok && info.GetReason() != "" {
				return info.GetReason()
			}
		}
	}
	return ce.Code().String()
}

// appendOnce appends one event, with request id and text id, through
// agent a with a timeout of measureCallTimeout, and records the call.
func appendOnce(ctx context.Context, clients *apiClients, sessionID, id string, a *agent, probe bool, log *appendLog) appendCall {
	callCtx, cancel := context.WithTimeout(ctx, measureCallTimeout)
	start := time.Now()
	resp, err := clients.of(a).session.AppendEvents(callCtx, connect.NewRequest(&fakv1.AppendEventsRequest{
		SessionId: sessionID,
		Events:    []*fakv1.EventInput{{Kind: "note", Text: id}}, // the kind clients append; no runner reacts
		RequestId: id,
	}))
	end := time.Now()
	cancel()
	c := appendCall{requestID: id, node: a.name, start: start, end: end, probe: probe}
	switch {
	case err == nil:
		c.seq = resp.Msg.GetFirstSeq()
		if resp.Msg.GetLastSeq() != c.seq || c.seq == 0 {
			c.failure = fmt.Sprintf("bad ack: seqs %d-%d", resp.Msg.GetFirstSeq(), resp.Msg.GetLastSeq())
		}
	case ctx.Err() != nil:
		// Cancelled by the test: the outcome is unknown, which the final
		// check tolerates (the call is not acknowledged).
		c.failure = "stopped"
	default:
		c.failure = failureReason(err)
	}
	log.add(c)
	return c
}

// runWriters starts n goroutines that append to sessionID one event per
// call until ctx ends, each call with its own request id and a timeout of
// measureCallTimeout, rotating over the agents whose process is running.
//
// Closed-loop writers alone measure recovery coarsely: the calls they start
// right after the kill wait inside a follower, whose forwarding retries back
// off to 200 ms, or time out after 1 s; so the first ack lands on that retry
// schedule. An open-loop prober therefore also starts a call every probe
// interval (if probe > 0), so some call starts just after the new leader is
// ready.
func runWriters(ctx context.Context, f *fleet, clients *apiClients, sessionID string, n int, probe time.Duration, log *appendLog) (wait func()) {
	var wg sync.WaitGroup
	runID := time.Now().UnixNano()
	pick := func(i int) *agent {
		running := f.running()
		if len(running) == 0 {
			return nil
		}
		return running[i%len(running)]
	}
	for w := range n {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				a := pick(i + w)
				if a == nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				c := appendOnce(ctx, clients, sessionID, fmt.Sprintf("m%d-w%d-%d", runID, w, i), a, false, log)
				// A node refusing connections fails at once: do not spin.
				if c.seq == 0 && c.end.Sub(c.start) < 5*time.Millisecond {
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	if probe > 0 {
		wg.Go(func() {
			var calls sync.WaitGroup
			defer calls.Wait()
			ticker := time.NewTicker(probe)
			defer ticker.Stop()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-ticker.C:
				}
				if a := pick(i); a != nil {
					id := fmt.Sprintf("m%d-p-%d", runID, i)
					calls.Go(func() { appendOnce(ctx, clients, sessionID, id, a, true, log) })
				}
			}
		})
	}
	return wg.Wait
}
