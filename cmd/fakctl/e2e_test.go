package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/fsm"
)

const testToken = "s3cret"

// fakeFleet serves SessionService and ClusterService from memory, with
// just enough behavior to drive the CLI.
type fakeFleet struct {
	fakv1connect.UnimplementedSessionServiceHandler
	fakv1connect.UnimplementedClusterServiceHandler

	// readPageLimit caps ReadEvents pages so that reads page.
	readPageLimit int
	// maxTextBytes, when set, rejects events with longer text.
	maxTextBytes int

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every append
	sessions map[string]*fakv1.Session
	events   map[string][]*fakv1.Event
	// watchBreaks makes that many WatchEvents streams fail with Unavailable
	// after sending one event, as when a node goes away.
	watchBreaks int
	watchAfter  []uint64 // after_seq of every WatchEvents call
	// lastCreate is the last CreateSession request.
	lastCreate *fakv1.CreateSessionRequest
	// What DescribeSession and DiscoverSession answer besides the session.
	attachments  map[string][]*fakv1.Attachment
	capabilities *fakv1.CapabilitySet
	budget       *fakv1.Envelope
	endpoints    []*fakv1.Endpoint
	describedAs  []string // attachment_id of every DescribeSession call
	nonHTTP2     atomic.Int64
}

func newFakeFleet() *fakeFleet {
	return &fakeFleet{
		readPageLimit: 2,
		changed:       make(chan struct{}),
		sessions:      make(map[string]*fakv1.Session),
		events:        make(map[string][]*fakv1.Event),
		attachments:   make(map[string][]*fakv1.Attachment),
	}
}

// start serves f over h2c, like a fak node, and returns its URL.
func (f *fakeFleet) start(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(fakv1connect.NewSessionServiceHandler(f, connect.WithInterceptors(requireToken{testToken})))
	mux.Handle(fakv1connect.NewClusterServiceHandler(f, connect.WithInterceptors(requireToken{testToken})))
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			f.nonHTTP2.Add(1)
		}
		mux.ServeHTTP(w, r)
	}))
	server.Config.Protocols = new(http.Protocols)
	server.Config.Protocols.SetHTTP1(true)
	server.Config.Protocols.SetUnencryptedHTTP2(true)
	server.Start()
	t.Cleanup(func() {
		server.Close()
		if n := f.nonHTTP2.Load(); n > 0 {
			t.Errorf("%d requests did not use HTTP/2", n)
		}
	})
	return server.URL
}

func fakeError(code connect.Code, reason, message string) error {
	err := connect.NewError(code, errors.New(message))
	if detail, detailErr := connect.NewErrorDetail(&fakv1.ErrorInfo{Reason: reason}); detailErr == nil {
		err.AddDetail(detail)
	}
	return err
}

// requireToken rejects calls without the bearer token, as fak nodes do.
type requireToken struct{ token string }

func (a requireToken) check(h http.Header) error {
	if h.Get("Authorization") != "Bearer "+a.token {
		return fakeError(connect.CodeUnauthenticated, "UNAUTHENTICATED", "invalid token")
	}
	return nil
}

func (a requireToken) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := a.check(req.Header()); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (a requireToken) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a requireToken) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := a.check(conn.RequestHeader()); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// eventTime gives events fixed, distinct times.
func eventTime(seq uint64) time.Time {
	return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(seq) * 1001 * time.Millisecond)
}

// CreateSession records the session like fak does: placed on the receiving
// node (n1) with the echo adapter unless the request says otherwise, and
// journaled as session.created then epoch.changed, so the head is 2.
func (f *fakeFleet) CreateSession(_ context.Context, req *connect.Request[fakv1.CreateSessionRequest]) (*connect.Response[fakv1.CreateSessionResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastCreate = req.Msg
	id := fmt.Sprintf("s-%d", len(f.sessions)+1)
	placement := proto.Clone(req.Msg.GetPlacement()).(*fakv1.Placement)
	if placement == nil {
		placement = &fakv1.Placement{}
	}
	if placement.Node == "" {
		placement.Node = "n1"
	}
	if placement.RuntimeAdapter == "" {
		placement.RuntimeAdapter = "echo"
	}
	session := &fakv1.Session{
		SessionId: id, Title: req.Msg.GetTitle(), Objective: req.Msg.GetObjective(),
		State: fakv1.SessionState_SESSION_STATE_ACTIVE, CreatedUnixNano: eventTime(0).UnixNano(),
		Epoch: 1, Placement: placement, Pending: &fakv1.PendingInteraction{},
	}
	f.sessions[id] = session
	epochData, _ := json.Marshal(map[string]any{"epoch": 1, "placement": map[string]string{
		"runtime_adapter": placement.RuntimeAdapter, "node": placement.Node, "model": placement.Model,
	}})
	f.appendLocked(session, &fakv1.EventInput{Kind: "session.created", Text: session.Title})
	f.appendLocked(session, &fakv1.EventInput{Kind: "epoch.changed", Text: "epoch 1", Data: epochData})
	return connect.NewResponse(&fakv1.CreateSessionResponse{Session: session}), nil
}

func (f *fakeFleet) appendLocked(session *fakv1.Session, input *fakv1.EventInput) {
	session.HeadSeq++
	f.events[session.SessionId] = append(f.events[session.SessionId], &fakv1.Event{
		SessionId: session.SessionId, Seq: session.HeadSeq, Kind: input.GetKind(), Text: input.GetText(),
		Data: input.GetData(), TimeUnixNano: eventTime(session.HeadSeq).UnixNano(),
	})
}

func (f *fakeFleet) ListSessions(_ context.Context, req *connect.Request[fakv1.ListSessionsRequest]) (*connect.Response[fakv1.ListSessionsResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var sessions []*fakv1.Session
	for _, s := range f.sessions {
		sessions = append(sessions, s)
	}
	slices.SortFunc(sessions, func(a, b *fakv1.Session) int { return strings.Compare(a.SessionId, b.SessionId) })
	return connect.NewResponse(&fakv1.ListSessionsResponse{Sessions: sessions}), nil
}

// DescribeSession answers with the session, the attachments and the
// capability set a test put in the fleet.
func (f *fakeFleet) DescribeSession(_ context.Context, req *connect.Request[fakv1.DescribeSessionRequest]) (*connect.Response[fakv1.DescribeSessionResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.describedAs = append(f.describedAs, req.Msg.GetAttachmentId())
	session, ok := f.sessions[req.Msg.GetSessionId()]
	if !ok {
		return nil, fakeError(connect.CodeNotFound, "NOT_FOUND", "session "+req.Msg.GetSessionId()+" not found")
	}
	return connect.NewResponse(&fakv1.DescribeSessionResponse{
		Session:      session,
		Attachments:  f.attachments[session.SessionId],
		Capabilities: f.capabilities,
		ComputeNode:  session.GetPlacement().GetNode(),
		Budget:       f.budget,
	}), nil
}

func (f *fakeFleet) DiscoverSession(_ context.Context, req *connect.Request[fakv1.DiscoverSessionRequest]) (*connect.Response[fakv1.DiscoverSessionResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	session, ok := f.sessions[req.Msg.GetSessionId()]
	if !ok {
		return nil, fakeError(connect.CodeNotFound, "NOT_FOUND", "session "+req.Msg.GetSessionId()+" not found")
	}
	return connect.NewResponse(&fakv1.DiscoverSessionResponse{
		SessionId: session.SessionId, Epoch: session.Epoch, Placement: session.Placement,
		ComputeNode: session.GetPlacement().GetNode(), Endpoints: f.endpoints,
	}), nil
}

func (f *fakeFleet) AppendEvents(_ context.Context, req *connect.Request[fakv1.AppendEventsRequest]) (*connect.Response[fakv1.AppendEventsResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := req.Msg.GetSessionId()
	session, ok := f.sessions[id]
	if !ok {
		return nil, fakeError(connect.CodeNotFound, "NOT_FOUND", "no session "+id)
	}
	head := session.GetHeadSeq()
	if req.Msg.ExpectedSeq != nil && req.Msg.GetExpectedSeq() != head {
		return nil, fakeError(connect.CodeAborted, "SEQ_MISMATCH",
			fmt.Sprintf("expected head %d, journal head is %d", req.Msg.GetExpectedSeq(), head))
	}
	for _, input := range req.Msg.GetEvents() {
		if f.maxTextBytes > 0 && len(input.GetText()) > f.maxTextBytes {
			return nil, fakeError(connect.CodeInvalidArgument, "INVALID_ARGUMENT", "event text too large")
		}
		if !fsm.AppendableKind(input.GetKind()) {
			return nil, fakeError(connect.CodeInvalidArgument, "INVALID_ARGUMENT",
				fmt.Sprintf("kind %q cannot be appended by clients", input.GetKind()))
		}
	}
	for _, input := range req.Msg.GetEvents() {
		f.appendLocked(session, input)
	}
	close(f.changed)
	f.changed = make(chan struct{})
	return connect.NewResponse(&fakv1.AppendEventsResponse{SessionId: id, FirstSeq: head + 1, LastSeq: session.HeadSeq}), nil
}

func (f *fakeFleet) ReadEvents(_ context.Context, req *connect.Request[fakv1.ReadEventsRequest]) (*connect.Response[fakv1.ReadEventsResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	events := f.events[req.Msg.GetSessionId()]
	from := max(req.Msg.GetFromSeq(), 1)
	page := events[min(from-1, uint64(len(events))):]
	page = page[:min(len(page), f.readPageLimit, int(req.Msg.GetLimit()))]
	return connect.NewResponse(&fakv1.ReadEventsResponse{Events: page, HeadSeq: uint64(len(events))}), nil
}

func (f *fakeFleet) WatchEvents(ctx context.Context, req *connect.Request[fakv1.WatchEventsRequest], stream *connect.ServerStream[fakv1.WatchEventsResponse]) error {
	f.mu.Lock()
	f.watchAfter = append(f.watchAfter, req.Msg.GetAfterSeq())
	breakAfterOne := f.watchBreaks > 0
	if breakAfterOne {
		f.watchBreaks--
	}
	f.mu.Unlock()

	after := req.Msg.GetAfterSeq()
	for {
		f.mu.Lock()
		pending := slices.Clone(f.events[req.Msg.GetSessionId()][after:])
		changed := f.changed
		f.mu.Unlock()
		for _, ev := range pending {
			if err := stream.Send(&fakv1.WatchEventsResponse{Events: []*fakv1.Event{ev}}); err != nil {
				return err
			}
			after = ev.GetSeq()
			if breakAfterOne {
				return connect.NewError(connect.CodeUnavailable, errors.New("node is shutting down"))
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *fakeFleet) Status(_ context.Context, req *connect.Request[fakv1.StatusRequest]) (*connect.Response[fakv1.StatusResponse], error) {
	nodes := []*fakv1.NodeStatus{{
		Name: "n1", RaftState: "Leader", Term: 2, LastLogIndex: 9, CommitIndex: 9, AppliedIndex: 9, LeaderId: "n1",
	}}
	if req.Msg.GetAll() {
		nodes = append(nodes, &fakv1.NodeStatus{Name: "n2", Error: "connection refused"})
	}
	return connect.NewResponse(&fakv1.StatusResponse{Nodes: nodes}), nil
}

// runCLI runs fakctl against addr with the test token unless args set one.
func runCLI(t *testing.T, addr string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCLIContext(context.Background(), addr, &bytes.Buffer{}, args...)
}

func runCLIContext(ctx context.Context, addr string, out interface {
	Write([]byte) (int, error)
	String() string
}, args ...string,
) (code int, stdout, stderr string) {
	var errOut bytes.Buffer
	args = append([]string{"--addr", addr}, args...)
	code = runContext(ctx, args, out, &errOut)
	return code, out.String(), errOut.String()
}

func TestSessionCommandsEndToEnd(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newFakeFleet()
	url := fleet.start(t)
	hostPort := strings.TrimPrefix(url, "http://")

	code, out, errOut := runCLI(t, hostPort, "session", "create", "--title", "demo", "--objective", "test")
	if code != exitOK || out != "s-1\n" {
		t.Fatalf("create: code %d stdout %q stderr %q", code, out, errOut)
	}

	// The journal starts with session.created and epoch.changed; appends
	// default to note, the kind any client may append.
	for i, text := range []string{"hello", "multi\nline", "third"} {
		code, out, errOut = runCLI(t, url, "session", "append", "s-1", "--text", text)
		if want := fmt.Sprintf("Appended s-1 seq %d\n", i+3); code != exitOK || out != want {
			t.Fatalf("append: code %d stdout %q stderr %q", code, out, errOut)
		}
	}

	// Compare-and-append against a stale head fails with the reason, on one line.
	code, out, errOut = runCLI(t, url, "session", "append", "s-1", "--text", "x", "--expected-seq", "1")
	if want := "Error: SEQ_MISMATCH: expected head 1, journal head is 5\n"; code != exitError || out != "" || errOut != want {
		t.Errorf("append --expected-seq: code %d stdout %q stderr %q", code, out, errOut)
	}
	code, _, errOut = runCLI(t, url, "session", "append", "s-1", "--kind", "checkpoint", "--text", "ok", "--expected-seq", "5")
	if code != exitOK {
		t.Errorf("append --expected-seq 5: code %d stderr %q", code, errOut)
	}
	// Input goes through Act, output is the runner's: the fleet refuses them.
	code, out, errOut = runCLI(t, url, "session", "append", "s-1", "--kind", "input", "--text", "hi")
	if want := "Error: INVALID_ARGUMENT: kind \"input\" cannot be appended by clients\n"; code != exitError || out != "" || errOut != want {
		t.Errorf("append --kind input: code %d stdout %q stderr %q", code, out, errOut)
	}

	// The read pages (two events per page) through to the head.
	code, out, errOut = runCLI(t, url, "session", "log", "s-1", "--from", "2")
	want := eventLines(
		eventLine(2, "epoch.changed", "epoch 1: echo on n1"),
		eventLine(3, "note", "note: hello"),
		eventLine(4, "note", `note: multi\nline`),
		eventLine(5, "note", "note: third"),
		eventLine(6, "checkpoint", "checkpoint: ok"),
	)
	if code != exitOK || out != want {
		t.Errorf("log: code %d stderr %q\nstdout:\n%s\nwant:\n%s", code, errOut, out, want)
	}

	code, out, _ = runCLI(t, url, "-o", "json", "session", "log", "s-1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var first struct{ Seq, Kind, Text string }
	if code != exitOK || len(lines) != 6 || json.Unmarshal([]byte(lines[0]), &first) != nil ||
		first.Seq != "1" || first.Kind != "session.created" || first.Text != "demo" {
		t.Errorf("log -o json: code %d stdout:\n%s", code, out)
	}

	code, _, errOut = runCLI(t, url, "session", "log", "s-404")
	if code != exitOK || errOut != "" {
		t.Errorf("log of an empty journal: code %d stderr %q", code, errOut)
	}
}

func TestFollowPrintsLiveEventsUntilInterrupted(t *testing.T) {
	isolateEnv(t)
	// The token comes from the dev token file, and must reach the stream too.
	writeFile(t, devTokenPath, testToken+"\n")
	fleet := newFakeFleet()
	url := fleet.start(t)
	runCLI(t, url, "session", "create", "--title", "follow")
	runCLI(t, url, "session", "append", "s-1", "--text", "one")
	runCLI(t, url, "session", "append", "s-1", "--text", "two") // seq 4

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := newLineWriter()
	done := make(chan int)
	var errOut string
	go func() {
		var code int
		code, _, errOut = runCLIContext(ctx, url, out, "session", "log", "s-1", "--follow", "--from", "4")
		done <- code
	}()

	out.waitLines(t, 1)
	runCLI(t, url, "session", "append", "s-1", "--text", "three")
	runCLI(t, url, "session", "append", "s-1", "--text", "four")
	out.waitLines(t, 3)
	cancel() // what Ctrl-C does

	if code := <-done; code != exitOK || errOut != "" {
		t.Errorf("follow: code %d stderr %q", code, errOut)
	}
	want := eventLines(eventLine(4, "note", "note: two"), eventLine(5, "note", "note: three"), eventLine(6, "note", "note: four"))
	if out.String() != want {
		t.Errorf("follow stdout:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestFollowResumesAfterBrokenStream(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newFakeFleet()
	fleet.watchBreaks = 2
	url := fleet.start(t)
	runCLI(t, url, "session", "create", "--title", "flaky")
	for _, text := range []string{"a", "b", "c", "d"} {
		runCLI(t, url, "session", "append", "s-1", "--text", text)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := newLineWriter()
	done := make(chan int)
	var errOut string
	go func() {
		var code int
		code, _, errOut = runCLIContext(ctx, url, out, "session", "log", "s-1", "--follow", "--from", "3")
		done <- code
	}()
	out.waitLines(t, 4)
	cancel()

	if code := <-done; code != exitOK {
		t.Errorf("follow: code %d stderr %q", code, errOut)
	}
	want := eventLines(eventLine(3, "note", "note: a"), eventLine(4, "note", "note: b"), eventLine(5, "note", "note: c"), eventLine(6, "note", "note: d"))
	if out.String() != want {
		t.Errorf("follow stdout (gaps or duplicates?):\n%s\nwant:\n%s", out.String(), want)
	}
	fleet.mu.Lock()
	defer fleet.mu.Unlock()
	if !slices.Equal(fleet.watchAfter, []uint64{2, 3, 4}) {
		t.Errorf("WatchEvents after_seq per call = %v, want [2 3 4]", fleet.watchAfter)
	}
	if strings.Count(errOut, "reconnecting") != 2 {
		t.Errorf("stderr should note each reconnect:\n%s", errOut)
	}
}

func TestTokenProblemsFailOnOneLine(t *testing.T) {
	isolateEnv(t)
	url := newFakeFleet().start(t)

	t.Setenv("FAK_TOKEN_FILE", "/nonexistent/fak-token")
	code, out, errOut := runCLI(t, url, "session", "list")
	if code != exitError || out != "" || !strings.HasPrefix(errOut, "Error: read token file: ") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("missing token file: code %d stdout %q stderr %q", code, out, errOut)
	}

	// --token wins over the broken file, but the server rejects it.
	code, _, errOut = runCLI(t, url, "session", "log", "s-1", "--follow", "--token", "wrong")
	if code != exitError || errOut != "Error: UNAUTHENTICATED: invalid token\n" {
		t.Errorf("bad token: code %d stderr %q", code, errOut)
	}
	code, _, errOut = runCLI(t, url, "--token", "wrong", "session", "create", "--title", "x")
	if code != exitError || errOut != "Error: UNAUTHENTICATED: invalid token\n" {
		t.Errorf("bad token: code %d stderr %q", code, errOut)
	}
}

func TestClusterStatusEndToEnd(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	url := newFakeFleet().start(t)

	code, out, errOut := runCLI(t, url, "cluster", "status")
	want := "NAME   STATE    TERM   LAST_INDEX   COMMIT   APPLIED   LEADER   ERROR\n" +
		"n1     Leader   2      9            9        9         n1       -\n" +
		"n2     -        -      -            -        -         -        connection refused\n"
	if code != exitOK || out != want {
		t.Errorf("status: code %d stderr %q\nstdout:\n%s\nwant:\n%s", code, errOut, out, want)
	}
	code, out, _ = runCLI(t, url, "cluster", "status", "--all=false")
	if code != exitOK || strings.Contains(out, "n2") || strings.Contains(out, "ERROR") {
		t.Errorf("status --all=false: code %d stdout:\n%s", code, out)
	}
	code, _, errOut = runCLI(t, url, "cluster", "members")
	if code != exitError || !strings.HasPrefix(errOut, "Error: unimplemented: ") {
		t.Errorf("members on a node without it: code %d stderr %q", code, errOut)
	}
}

func TestBenchAppendEndToEnd(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newFakeFleet()
	url := fleet.start(t)

	code, out, errOut := runCLI(t, url, "-o", "json", "bench", "append",
		"--sessions", "3", "--clients", "4", "--total", "50", "--size", "16", "--batch", "3",
		"--addrs", url+","+strings.TrimPrefix(url, "http://"))
	var summary struct {
		Events, Calls, Errors int64
		Addrs                 []string
		LatencyMillis         struct{ P50, Max float64 } `json:"latency_ms"`
	}
	if err := json.Unmarshal([]byte(out), &summary); code != exitOK || err != nil {
		t.Fatalf("bench: code %d err %v stderr %q stdout:\n%s", code, err, errOut, out)
	}
	if summary.Events != 50 || summary.Calls != 17 || summary.Errors != 0 || len(summary.Addrs) != 2 ||
		summary.LatencyMillis.P50 <= 0 || summary.LatencyMillis.Max < summary.LatencyMillis.P50 {
		t.Errorf("summary = %+v", summary)
	}
	fleet.mu.Lock()
	total := 0
	for id, events := range fleet.events {
		events = events[2:] // session.created, epoch.changed
		total += len(events)
		if len(events) < 15 {
			t.Errorf("session %s got %d events; appends should spread evenly", id, len(events))
		}
		if len(events) > 0 && (len(events[0].GetText()) != 16 || events[0].GetKind() != "note") {
			t.Errorf("event = %v", events[0])
		}
	}
	fleet.mu.Unlock()
	if total != 50 || len(fleet.sessions) != 3 {
		t.Errorf("fleet holds %d events in %d sessions, want 50 in 3", total, len(fleet.sessions))
	}
}

func TestBenchAppendReportsFailures(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newFakeFleet()
	fleet.maxTextBytes = 8
	url := fleet.start(t)

	code, out, errOut := runCLI(t, url, "bench", "append", "--sessions", "2", "--clients", "2", "--total", "10", "--size", "9")
	if code != exitError {
		t.Errorf("code %d, want %d", code, exitError)
	}
	if !strings.Contains(out, "Errors:        10") {
		t.Errorf("stdout:\n%s", out)
	}
	if !strings.Contains(errOut, "10  INVALID_ARGUMENT: event text too large") ||
		!strings.HasSuffix(errOut, "Error: 10 of 10 calls failed\n") {
		t.Errorf("stderr:\n%s", errOut)
	}
}

func eventLine(seq uint64, kind, text string) string {
	return fmt.Sprintf("%d  %s  %s  %s", seq, eventTime(seq).Local().Format("15:04:05.000"), kind, text)
}

func eventLines(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// lineWriter collects output written concurrently and lets a test wait for
// a number of lines.
type lineWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // signalled after each write
}

func newLineWriter() *lineWriter { return &lineWriter{written: make(chan struct{}, 1)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.written <- struct{}{}:
	default:
	}
	return w.buf.Write(p)
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *lineWriter) waitLines(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for strings.Count(w.String(), "\n") < n {
		select {
		case <-w.written:
		case <-timeout:
			t.Fatalf("timed out waiting for %d lines; got:\n%s", n, w.String())
		}
	}
}
