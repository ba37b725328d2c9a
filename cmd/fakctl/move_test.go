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
	"google.golang.org/protobuf/encoding/protojson"
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

func TestSessionMovePrintsEachTransition(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newMoveFleet()
	fleet.script = successScript()
	url := fleet.start(t)

	code, out, errOut := runCLI(t, url, "session", "move", "s-1", "--to", "n2")
	if code != exitOK || errOut != "" {
		t.Fatalf("move: code %d stderr %q\n%s", code, errOut, out)
	}
	req := fleet.moveReq
	if req.GetSessionId() != "s-1" || req.GetToNode() != "n2" || req.GetSafePointTimeoutMs() != 30000 || req.GetAcceptDegradation() {
		t.Errorf("MoveSession request %v", req)
	}
	if len(fleet.watchers) != 1 || fleet.watchers[0] != 5 {
		t.Errorf("WatchEvents after %v, want the head before the request (5)", fleet.watchers)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{
		`^Move mov_1 of s-1: n1 \(epoch 2\) → n2$`,
		`^ +\d+ms  SAFE_POINT_REQUESTED$`,
		`^ +\d+ms  CHECKPOINTED at #6$`,
		`^ +\d+ms  DESTINATION_ADMITTED n2 \(alive, not_draining, capacity, adapter, provider, model, account_ref, budget, labels, degradation\)$`,
		`^ +\d+ms  RESTORED epoch 3 on n2$`,
		`^ +\d+ms  CUTOVER_COMMITTED n1 → n2$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %s", i, lines[i], re)
		}
	}
	// The times are the fleet's commit times since it committed the request,
	// plus the request's round trip.
	base := msOf(t, lines[1])
	for i, after := range []int{18, 19, 33, 34} {
		if got := msOf(t, lines[i+2]) - base; got != after {
			t.Errorf("line %q is %dms after the request's commit, want %d", lines[i+2], got, after)
		}
	}

	// -o json: only the final move.
	fleet2 := newMoveFleet()
	fleet2.script = successScript()
	url2 := fleet2.start(t)
	code, out, errOut = runCLI(t, url2, "-o", "json", "session", "move", "s-1", "--to", "n2", "--safe-point-timeout", "2s")
	if code != exitOK || errOut != "" {
		t.Fatalf("move -o json: code %d stderr %q", code, errOut)
	}
	var got fakv1.Move
	if err := protojson.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("move -o json is not a Move: %v\n%s", err, out)
	}
	if got.GetState() != moveCutoverCommitted || got.GetNewEpoch() != 3 || got.GetMoveId() != "mov_1" {
		t.Errorf("move -o json: %v", &got)
	}
	if fleet2.moveReq.GetSafePointTimeoutMs() != 2000 {
		t.Errorf("--safe-point-timeout 2s sent %d ms", fleet2.moveReq.GetSafePointTimeoutMs())
	}
}

func TestSessionMoveFailures(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)

	// A refused destination: exit 1, the transition on stdout, the reason on
	// one line of stderr.
	fleet := newMoveFleet()
	fleet.script = []moveStep{
		{"move.checkpointed", 3 * time.Millisecond, map[string]any{"move_id": "mov_1", "state": moveCheckpointed, "checkpoint_seq": 6}},
		{"move.failed", 4 * time.Millisecond, map[string]any{"move_id": "mov_1", "state": moveFailed, "phase": moveCheckpointed,
			"reason": "n3 refused: alive: gossip says dead; not_draining: the node is draining"}},
	}
	url := fleet.start(t)
	code, out, errOut := runCLI(t, url, "session", "move", "s-1", "--to", "n3")
	if code != exitError || errOut != "Error: MOVE_FAILED: n3 refused: alive: gossip says dead; not_draining: the node is draining (in CHECKPOINTED)\n" {
		t.Errorf("failed move: code %d stderr %q", code, errOut)
	}
	if !regexp.MustCompile(`(?m)^ +\d+ms  MOVE_FAILED in CHECKPOINTED: n3 refused: alive: gossip says dead; not_draining: the node is draining$`).MatchString(out) {
		t.Errorf("failed move stdout:\n%s", out)
	}

	// No safe point in time.
	fleet = newMoveFleet()
	fleet.script = []moveStep{{"move.unsafe", time.Second, map[string]any{"move_id": "mov_1", "state": moveUnsafe, "phase": moveSafePointRequested,
		"reason": "no safe point within 1s (a turn is in flight)"}}}
	url = fleet.start(t)
	code, _, errOut = runCLI(t, url, "session", "move", "s-1", "--safe-point-timeout", "1s")
	if code != exitError || errOut != "Error: MOVE_UNSAFE: no safe point within 1s (a turn is in flight) (in SAFE_POINT_REQUESTED)\n" {
		t.Errorf("unsafe move: code %d stderr %q", code, errOut)
	}

	// Refusals of the request itself.
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fakeError(connect.CodeFailedPrecondition, "BUSY", "move mov_0 of session s-1 is in progress (CHECKPOINTED)"),
			"Error: BUSY: move mov_0 of session s-1 is in progress (CHECKPOINTED)\n"},
		{fakeError(connect.CodeNotFound, "NOT_FOUND", "node n9 not found (no node record; fakctl node list shows the nodes)"),
			"Error: NOT_FOUND: node n9 not found (no node record; fakctl node list shows the nodes)\n"},
		{fakeError(connect.CodeFailedPrecondition, "SESSION_STOPPED", "session s-1 is stopped (done)"),
			"Error: SESSION_STOPPED: session s-1 is stopped (done)\n"},
	} {
		fleet = newMoveFleet()
		fleet.moveErr = tt.err
		url = fleet.start(t)
		code, out, errOut = runCLI(t, url, "session", "move", "s-1", "--to", "n9")
		if code != exitError || out != "" || errOut != tt.want {
			t.Errorf("refused move: code %d stdout %q stderr %q; want %q", code, out, errOut, tt.want)
		}
	}
	code, _, errOut = runCLI(t, url, "session", "move", "s-404")
	if code != exitError || errOut != "Error: NOT_FOUND: session s-404 not found\n" {
		t.Errorf("unknown session: code %d stderr %q", code, errOut)
	}

	// A move nothing drives: fakctl gives up waiting, the move goes on.
	fleet = newMoveFleet()
	url = fleet.start(t)
	code, _, errOut = runCLI(t, url, "session", "move", "s-1", "--timeout", "300ms")
	if code != exitError || errOut != "Error: move mov_1 is still SAFE_POINT_REQUESTED after 300ms; it goes on: fakctl session move-status s-1\n" {
		t.Errorf("stuck move: code %d stderr %q", code, errOut)
	}

	// Usage errors.
	if code, _, _ := runCLI(t, url, "session", "move", "s-1", "--safe-point-timeout", "0s"); code != exitUsage {
		t.Errorf("--safe-point-timeout 0s: code %d, want %d", code, exitUsage)
	}
	if code, _, _ := runCLI(t, url, "session", "move"); code != exitUsage {
		t.Errorf("no session: code %d, want %d", code, exitUsage)
	}
}

// TestSessionMoveRetryFollowsTheSameMove: with --request-id the move's
// events may be older than the head, so the watch reads the whole journal.
func TestSessionMoveRetryFollowsTheSameMove(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newMoveFleet()
	fleet.script = successScript()
	url := fleet.start(t)
	if code, _, errOut := runCLI(t, url, "session", "move", "s-1", "--to", "n2", "--request-id", "r1"); code != exitOK {
		t.Fatalf("move: code %d stderr %q", code, errOut)
	}
	if len(fleet.watchers) != 1 || fleet.watchers[0] != 0 {
		t.Errorf("WatchEvents after %v, want 0", fleet.watchers)
	}
	if fleet.moveReq.GetRequestId() != "r1" {
		t.Errorf("request id %q", fleet.moveReq.GetRequestId())
	}
}

func TestSessionMoveStatus(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newMoveFleet()
	url := fleet.start(t)
	code, out, errOut := runCLI(t, url, "session", "move-status", "s-1")
	if code != exitOK || out != "Move: none (session s-1 has not been moved)\n" {
		t.Errorf("no move: code %d stdout %q stderr %q", code, out, errOut)
	}

	fleet.move = &fakv1.Move{MoveId: "mov_1", SessionId: "s-1", State: moveFailed, Cause: "drain",
		Target: &fakv1.Placement{}, SourceNode: "n1", SourceEpoch: 2, CheckpointSeq: 41, Digest: strings.Repeat("0f", 32),
		Reason: "n2 refused: capacity: hosts 4 of 4 sessions", Phase: moveCheckpointed,
		RequestedUnixNano: moveT0, StateUnixNano: moveT0 + int64(12*time.Millisecond)}
	code, out, errOut = runCLI(t, url, "session", "move-status", "s-1")
	if code != exitOK {
		t.Fatalf("move-status: code %d stderr %q", code, errOut)
	}
	for _, re := range []string{
		`(?m)^Move: +mov_1$`,
		`(?m)^State: +MOVE_FAILED$`,
		`(?m)^Cause: +drain$`,
		`(?m)^From: +n1 \(epoch 2\)$`,
		`(?m)^Requested: +any admitted node$`,
		`(?m)^Checkpoint: +at seq 41 \(digest 0f0f0f0f0f0f…\)$`,
		`(?m)^Degradation: +none$`,
		`(?m)^Reason: +n2 refused: capacity: hosts 4 of 4 sessions$`,
		`(?m)^Failed in: +CHECKPOINTED$`,
		`(?m)^Last transition: +\S+ \(12ms after the request\)$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("move-status does not match %s:\n%s", re, out)
		}
	}
	fleet.move.State, fleet.move.Reason, fleet.move.Phase = moveAdmitted, "", ""
	fleet.move.Target = &fakv1.Placement{Node: "n2", Model: "m2"}
	fleet.move.Admitted = &fakv1.Placement{RuntimeAdapter: "echo", Node: "n2", Model: "m2"}
	fleet.move.Degradation, fleet.move.AcceptDegradation = []string{`model "m1" → "m2": the provider cache starts cold`}, true
	fleet.move.Checks = []string{"alive", "capacity"}
	_, out, _ = runCLI(t, url, "session", "move-status", "s-1")
	for _, re := range []string{
		`(?m)^State: +DESTINATION_ADMITTED \(in progress\)$`,
		`(?m)^Requested: +n2, model m2$`,
		`(?m)^Admitted: +echo on n2, model m2$`,
		`(?m)^Checks passed: +alive, capacity$`,
		`(?m)^Degradation: +model "m1" → "m2": the provider cache starts cold \(accepted\)$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("move-status does not match %s:\n%s", re, out)
		}
	}
	if strings.Contains(out, "Reason:") {
		t.Errorf("an open move shows a reason:\n%s", out)
	}
	code, out, _ = runCLI(t, url, "-o", "json", "session", "move-status", "s-1")
	var resp fakv1.GetMoveResponse
	if err := protojson.Unmarshal([]byte(out), &resp); code != exitOK || err != nil || resp.GetMove().GetMoveId() != "mov_1" {
		t.Errorf("move-status -o json: code %d err %v\n%s", code, err, out)
	}
}

func testNodes() []*fakv1.Node {
	return []*fakv1.Node{
		{Name: "n2", Status: "alive", Capacity: 10, RuntimeAdapters: []string{"echo", "exec"}, Providers: []string{"anthropic"},
			Models: []string{"m1", "m2"}, Labels: []*fakv1.Label{{Key: "rack", Value: "b"}, {Key: "zone", Value: "z1"}}, Moving: 1},
		{Name: "n1", Status: "alive", RuntimeAdapters: []string{"echo"}},
		{Name: "n3", Status: "dead", Draining: true, RuntimeAdapters: []string{"echo"}},
	}
}

func TestNodeList(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newMoveFleet()
	url := fleet.start(t)
	code, out, _ := runCLI(t, url, "node", "list")
	if code != exitOK || out != "no node records\n" {
		t.Errorf("no nodes: code %d stdout %q", code, out)
	}
	fleet.nodes = testNodes()
	fleet.sessions = []*fakv1.Session{
		{SessionId: "s-1", State: fakv1.SessionState_SESSION_STATE_ACTIVE, Placement: &fakv1.Placement{Node: "n2"}},
		{SessionId: "s-2", State: fakv1.SessionState_SESSION_STATE_ACTIVE, Placement: &fakv1.Placement{Node: "n2"}},
	}
	code, out, errOut := runCLI(t, url, "node", "list")
	if code != exitOK {
		t.Fatalf("node list: code %d stderr %q", code, errOut)
	}
	want := [][]string{
		{"n1", "alive", "0/unlimited", "no", "echo", "", "", ""},
		{"n2", "alive", "2/10 (1 moving)", "no", "echo,exec", "anthropic", "m1,m2", "rack=b,zone=z1"},
		{"n3", "dead", "0/unlimited", "yes", "echo", "", "", ""},
	}
	var b strings.Builder
	writeTable(&b, []string{"NAME", "STATUS", "SESSIONS", "DRAINING", "ADAPTERS", "PROVIDERS", "MODELS", "LABELS"}, want)
	if out != b.String() {
		t.Errorf("node list:\n%s\nwant:\n%s", out, b.String())
	}
	code, out, _ = runCLI(t, url, "-o", "json", "node", "list")
	var resp fakv1.ListNodesResponse
	if err := protojson.Unmarshal([]byte(out), &resp); code != exitOK || err != nil || len(resp.GetNodes()) != 3 || resp.GetNodes()[0].GetName() != "n1" {
		t.Errorf("node list -o json: code %d err %v\n%s", code, err, out)
	}
}

func TestNodeDrainShowsEachSessionLeaving(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	defer func(d time.Duration) { drainPoll = d }(drainPoll)
	drainPoll = 5 * time.Millisecond
	fleet := newMoveFleet()
	fleet.nodes = testNodes()
	active := fakv1.SessionState_SESSION_STATE_ACTIVE
	fleet.sessions = []*fakv1.Session{
		{SessionId: "s-1", State: active, Epoch: 2, Placement: &fakv1.Placement{Node: "n1"}},
		{SessionId: "s-2", State: active, Epoch: 4, Placement: &fakv1.Placement{Node: "n1"}},
		{SessionId: "s-3", State: active, Epoch: 1, Placement: &fakv1.Placement{Node: "n1"}},
		{SessionId: "s-4", State: active, Epoch: 1, Placement: &fakv1.Placement{Node: "n2"}},
	}
	url := fleet.start(t)
	code, out, errOut := runCLI(t, url, "node", "drain", "n1")
	if code != exitOK || errOut != "" {
		t.Fatalf("drain: code %d stderr %q\n%s", code, errOut, out)
	}
	if len(fleet.drains) != 1 || fleet.drains[0].GetNode() != "n1" || !fleet.drains[0].GetDraining() {
		t.Errorf("DrainNode calls %v", fleet.drains)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{
		`^Node n1 is draining: no new sessions; 3 sessions to move away$`,
		`^ +\d+ms  s-1 not moved yet: MOVE_FAILED: digest mismatch \(in DESTINATION_ADMITTED\)$`,
		`^ +\d+ms  s-1 moved n1 → n2 \(epoch 3\)$`,
		`^ +\d+ms  s-2 moved n1 → n2 \(epoch 5\)$`,
		`^ +\d+ms  s-3 stopped \(done\)$`,
		`^Node n1 is drained: 2 sessions moved in \S+; it stays draining until fakctl node undrain n1$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %s", i, lines[i], re)
		}
	}

	code, out, _ = runCLI(t, url, "node", "undrain", "n1")
	if code != exitOK || out != "Node n1 is not draining: it admits sessions again (hosts 0/unlimited)\n" {
		t.Errorf("undrain: code %d stdout %q", code, out)
	}
	if last := fleet.drains[len(fleet.drains)-1]; last.GetDraining() {
		t.Errorf("undrain sent draining=true")
	}
	code, _, errOut = runCLI(t, url, "node", "drain", "n9")
	if code != exitError || errOut != "Error: NOT_FOUND: node n9 not found\n" {
		t.Errorf("drain unknown: code %d stderr %q", code, errOut)
	}
}

func TestNodeDrainTimesOut(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	defer func(d time.Duration) { drainPoll = d }(drainPoll)
	drainPoll = 5 * time.Millisecond
	fleet := newMoveFleet()
	fleet.nodes = testNodes()
	// A session on n3, which ListSessions never moves.
	fleet.sessions = []*fakv1.Session{{SessionId: "s-9", State: fakv1.SessionState_SESSION_STATE_ACTIVE, Placement: &fakv1.Placement{Node: "n3"}}}
	url := fleet.start(t)
	code, out, errOut := runCLI(t, url, "node", "drain", "n3", "--timeout", "100ms")
	if code != exitError || errOut != "Error: node n3 still hosts 1 session after 100ms; it stays draining (fakctl node list)\n" {
		t.Errorf("drain timeout: code %d stdout %q stderr %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, url, "node", "drain", "n3", "--no-wait")
	if code != exitOK || out != "Node n3 is draining: no new sessions; 1 session to move away\n" {
		t.Errorf("drain --no-wait: code %d stdout %q", code, out)
	}
}
