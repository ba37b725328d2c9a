package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

// moveFleet scripts the move and node RPCs: MoveSession answers the move
// and then journals the events of script, WatchEvents streams the journal,
// GetMove answers the move as the script left it, and NodeService serves
// nodes whose sessions leave a draining node one per ListSessions call.
type moveFleet struct {
	fakv1connect.UnimplementedSessionServiceHandler
	fakv1connect.UnimplementedNodeServiceHandler

	mu       sync.Mutex
	changed  chan struct{}
	head     uint64
	events   []*fakv1.Event
	move     *fakv1.Move
	moveReq  *fakv1.MoveSessionRequest
	moveErr  error
	script   []moveStep // journaled after MoveSession answers
	watchers []uint64   // after_seq of every WatchEvents
	nodes    []*fakv1.Node
	sessions []*fakv1.Session
	drains   []*fakv1.DrainNodeRequest
	lists    int // ListSessions calls
	// blocked answers DrainStatus: session → refusals, the same for any
	// node asked.
	blocked map[string]string
}

// moveStep is one transition: its state, its facts and its commit time
// after the request.
type moveStep struct {
	kind  string
	after time.Duration
	facts map[string]any
}

const moveT0 = int64(1_900_000_000_000_000_000)

func newMoveFleet() *moveFleet {
	return &moveFleet{changed: make(chan struct{}), head: 5}
}

func (f *moveFleet) start(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	opts := connect.WithInterceptors(requireToken{testToken})
	mux.Handle(fakv1connect.NewSessionServiceHandler(f, opts))
	mux.Handle(fakv1connect.NewNodeServiceHandler(f, opts))
	server := httptest.NewUnstartedServer(mux)
	server.Config.Protocols = new(http.Protocols)
	server.Config.Protocols.SetHTTP1(true)
	server.Config.Protocols.SetUnencryptedHTTP2(true)
	server.Start()
	t.Cleanup(server.Close)
	return server.URL
}

func (f *moveFleet) appendLocked(kind, text string, at time.Duration, facts map[string]any) {
	f.head++
	var data []byte
	if facts != nil {
		data, _ = json.Marshal(facts)
	}
	f.events = append(f.events, &fakv1.Event{SessionId: "s-1", Seq: f.head, Kind: kind, Text: text, Data: data,
		TimeUnixNano: moveT0 + int64(at)})
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *moveFleet) DescribeSession(_ context.Context, req *connect.Request[fakv1.DescribeSessionRequest]) (*connect.Response[fakv1.DescribeSessionResponse], error) {
	if req.Msg.GetSessionId() != "s-1" {
		return nil, fakeError(connect.CodeNotFound, "NOT_FOUND", "session "+req.Msg.GetSessionId()+" not found")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return connect.NewResponse(&fakv1.DescribeSessionResponse{Session: &fakv1.Session{SessionId: "s-1", HeadSeq: f.head, Epoch: 2}}), nil
}

func (f *moveFleet) MoveSession(_ context.Context, req *connect.Request[fakv1.MoveSessionRequest]) (*connect.Response[fakv1.MoveSessionResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moveReq = req.Msg
	if f.moveErr != nil {
		return nil, f.moveErr
	}
	f.move = &fakv1.Move{MoveId: "mov_1", SessionId: "s-1", State: moveSafePointRequested, Cause: "operator",
		Target: &fakv1.Placement{Node: req.Msg.GetToNode(), Model: req.Msg.GetModel()}, SourceNode: "n1", SourceEpoch: 2,
		RequestedUnixNano: moveT0, StateUnixNano: moveT0}
	answer := proto.Clone(f.move).(*fakv1.Move)
	f.appendLocked("move.requested", "move requested", 0, map[string]any{
		"move_id": "mov_1", "state": moveSafePointRequested, "cause": "operator", "from": "n1", "to": req.Msg.GetToNode(), "source_epoch": 2})
	f.appendLocked("note", "someone else's note", time.Millisecond, nil)
	for _, st := range f.script {
		f.appendLocked(st.kind, st.kind, st.after, st.facts)
		if s, ok := st.facts["state"].(string); ok && st.kind != "epoch.changed" {
			f.move.State, f.move.StateUnixNano = s, moveT0+int64(st.after)
			if r, ok := st.facts["reason"].(string); ok {
				f.move.Reason, f.move.Phase = r, st.facts["phase"].(string)
			}
			if e, ok := st.facts["new_epoch"].(int); ok {
				f.move.NewEpoch = uint64(e)
			}
		}
	}
	return connect.NewResponse(&fakv1.MoveSessionResponse{Move: answer}), nil
}

func (f *moveFleet) GetMove(_ context.Context, req *connect.Request[fakv1.GetMoveRequest]) (*connect.Response[fakv1.GetMoveResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return connect.NewResponse(&fakv1.GetMoveResponse{Move: f.move}), nil
}

func (f *moveFleet) WatchEvents(ctx context.Context, req *connect.Request[fakv1.WatchEventsRequest], stream *connect.ServerStream[fakv1.WatchEventsResponse]) error {
	f.mu.Lock()
	f.watchers = append(f.watchers, req.Msg.GetAfterSeq())
	f.mu.Unlock()
	after := req.Msg.GetAfterSeq()
	for {
		f.mu.Lock()
		var pending []*fakv1.Event
		for _, ev := range f.events {
			if ev.GetSeq() > after {
				pending = append(pending, ev)
			}
		}
		changed := f.changed
		f.mu.Unlock()
		if len(pending) > 0 {
			if err := stream.Send(&fakv1.WatchEventsResponse{Events: pending}); err != nil {
				return err
			}
			after = pending[len(pending)-1].GetSeq()
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *moveFleet) ListNodes(context.Context, *connect.Request[fakv1.ListNodesRequest]) (*connect.Response[fakv1.ListNodesResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var nodes []*fakv1.Node
	for _, n := range f.nodes {
		n = proto.Clone(n).(*fakv1.Node)
		n.Sessions = 0
		for _, s := range f.sessions {
			if s.GetState() == fakv1.SessionState_SESSION_STATE_ACTIVE && s.GetPlacement().GetNode() == n.GetName() {
				n.Sessions++
			}
		}
		nodes = append(nodes, n)
	}
	return connect.NewResponse(&fakv1.ListNodesResponse{Nodes: nodes}), nil
}

func (f *moveFleet) DrainNode(_ context.Context, req *connect.Request[fakv1.DrainNodeRequest]) (*connect.Response[fakv1.DrainNodeResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drains = append(f.drains, req.Msg)
	for _, n := range f.nodes {
		if n.GetName() == req.Msg.GetNode() {
			n.Draining = req.Msg.GetDraining()
			out := proto.Clone(n).(*fakv1.Node)
			for _, s := range f.sessions {
				if s.GetPlacement().GetNode() == n.GetName() && s.GetState() == fakv1.SessionState_SESSION_STATE_ACTIVE {
					out.Sessions++
				}
			}
			return connect.NewResponse(&fakv1.DrainNodeResponse{Node: out}), nil
		}
	}
	return nil, fakeError(connect.CodeNotFound, "NOT_FOUND", "node "+req.Msg.GetNode()+" not found")
}

func (f *moveFleet) DrainStatus(context.Context, *connect.Request[fakv1.DrainStatusRequest]) (*connect.Response[fakv1.DrainStatusResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &fakv1.DrainStatusResponse{}
	for id, why := range f.blocked {
		out.Blocked = append(out.Blocked, &fakv1.BlockedSession{SessionId: id, Refusals: why})
	}
	return connect.NewResponse(out), nil
}

// ListSessions moves one session off a draining node per call: the first
// one's move fails once before it succeeds, and one stops instead.
func (f *moveFleet) ListSessions(context.Context, *connect.Request[fakv1.ListSessionsRequest]) (*connect.Response[fakv1.ListSessionsResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.lists > 1 {
		for _, s := range f.sessions {
			if s.GetState() != fakv1.SessionState_SESSION_STATE_ACTIVE || s.GetPlacement().GetNode() != "n1" {
				continue
			}
			switch {
			case s.GetSessionId() == "s-1" && s.GetMove() == nil:
				s.Move = &fakv1.Move{MoveId: "mov_a", State: moveFailed, Reason: "digest mismatch", Phase: moveAdmitted}
			case s.GetSessionId() == "s-3":
				s.State, s.StopReason = fakv1.SessionState_SESSION_STATE_STOPPED, "done"
			default:
				s.Placement.Node, s.Epoch = "n2", s.GetEpoch()+1
			}
			break
		}
	}
	var out []*fakv1.Session
	for _, s := range f.sessions {
		out = append(out, proto.Clone(s).(*fakv1.Session))
	}
	return connect.NewResponse(&fakv1.ListSessionsResponse{Sessions: out}), nil
}

// successScript is a move of s-1 from n1 to n2 that commits its cutover
// 34 ms after the request.
func successScript() []moveStep {
	return []moveStep{
		{"move.checkpointed", 18 * time.Millisecond, map[string]any{"move_id": "mov_1", "state": moveCheckpointed, "source_epoch": 2, "checkpoint_seq": 6,
			"digest": strings.Repeat("ab", 32)}},
		{"move.admitted", 19 * time.Millisecond, map[string]any{"move_id": "mov_1", "state": moveAdmitted, "to": "n2",
			"placement": map[string]any{"runtime_adapter": "echo", "node": "n2"},
			"checks":    []string{"alive", "not_draining", "capacity", "adapter", "provider", "model", "account_ref", "budget", "labels", "degradation"}}},
		{"move.restored", 33 * time.Millisecond, map[string]any{"move_id": "mov_1", "state": moveRestored, "to": "n2", "new_epoch": 3}},
		{"epoch.changed", 34 * time.Millisecond, map[string]any{"epoch": 3, "placement": map[string]any{"runtime_adapter": "echo", "node": "n2"}, "reason": "move"}},
		{"move.cutover", 34 * time.Millisecond, map[string]any{"move_id": "mov_1", "state": moveCutoverCommitted, "from": "n1", "to": "n2", "new_epoch": 3, "cause": "operator"}},
	}
}

// msOf reads the elapsed milliseconds of a transition line.
func msOf(t *testing.T, line string) int {
	t.Helper()
	m := regexp.MustCompile(`^ *(\d+)ms  `).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("not a transition line: %q", line)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func testNodes() []*fakv1.Node {
	return []*fakv1.Node{
		{Name: "n2", Status: "alive", Capacity: 10, RuntimeAdapters: []string{"echo", "exec"}, Providers: []string{"anthropic"},
			Models: []string{"m1", "m2"}, Labels: []*fakv1.Label{{Key: "rack", Value: "b"}, {Key: "zone", Value: "z1"}}, Moving: 1,
			RuntimeMeters: []string{"claude=gateway", "codex=cli"}},
		{Name: "n1", Status: "alive", RuntimeAdapters: []string{"echo"}},
		{Name: "n3", Status: "dead", Draining: true, RuntimeAdapters: []string{"echo"}},
	}
}
