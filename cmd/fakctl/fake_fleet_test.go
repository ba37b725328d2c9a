package main

import (
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
	meteredBy    string
	budget       *fakv1.Envelope
	endpoints    []*fakv1.Endpoint
	describedAs  []string // attachment_id of every DescribeSession call
	wrongProto   atomic.Int64
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
		// fakctl's contract with a node: streams over HTTP/2, unary
		// calls over HTTP/1.1 (apiclient's split transport).
		ct := r.Header.Get("Content-Type")
		stream := strings.HasPrefix(ct, "application/connect+") || strings.HasPrefix(ct, "application/grpc")
		if stream != (r.ProtoMajor == 2) {
			f.wrongProto.Add(1)
		}
		mux.ServeHTTP(w, r)
	}))
	server.Config.Protocols = new(http.Protocols)
	server.Config.Protocols.SetHTTP1(true)
	server.Config.Protocols.SetUnencryptedHTTP2(true)
	server.Start()
	t.Cleanup(func() {
		server.Close()
		if n := f.wrongProto.Load(); n > 0 {
			t.Errorf("%d requests used the wrong protocol (streams go over HTTP/2, unary calls over HTTP/1.1)", n)
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
		MeteredBy:    f.meteredBy,
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
