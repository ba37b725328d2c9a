package node_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/node/testcluster"
)

// Bad input gets a typed error and commits nothing: the leader's last log
// index does not move.
func TestCluster_BadInputIsRejectedAndNothingCommitted(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{MaxEventBytes: 4096})
	leader := c.Leader()
	follower := c.Followers()[0]
	id := createSession(t, c, leader, "bad-input")
	if _, err := appendText(ctxT(t, 5*time.Second), c, follower, id, "ok"); err != nil {
		t.Fatal(err)
	}
	// The leader commits every node's record once after start (node
	// records from gossip); let that settle, so the log index below moves
	// only if bad input reaches the log.
	c.WaitFor(10*time.Second, "the node records", func() bool {
		nodes, err := leader.Running().FSM().Nodes()
		return err == nil && len(nodes) == 3
	})
	c.WaitFor(5*time.Second, "followers to apply", func() bool {
		return follower.Running().FSM().AppliedIndex() == leader.Running().Cluster().Raft().LastIndex()
	})
	lastIndex := leader.Running().Cluster().Raft().LastIndex()

	big := strings.Repeat("x", 4097)
	wrongToken := fakv1connect.NewSessionServiceClient(c.HTTPClient(), "http://"+follower.APIAddr,
		connect.WithInterceptors(apiclient.Bearer("wrong")))
	noToken := fakv1connect.NewSessionServiceClient(c.HTTPClient(), "http://"+follower.APIAddr)
	tests := []struct {
		name   string
		call   func(ctx context.Context) error
		code   connect.Code
		reason string
	}{
		{"unknown session", func(ctx context.Context) error {
			_, err := appendText(ctx, c, follower, "ses_nope", "x")
			return err
		}, connect.CodeNotFound, "NOT_FOUND"},
		{"unknown session describe", func(ctx context.Context) error {
			_, err := c.Sessions(follower).DescribeSession(ctx, connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: "ses_nope"}))
			return err
		}, connect.CodeNotFound, "NOT_FOUND"},
		{"oversized event", func(ctx context.Context) error {
			_, err := c.Sessions(follower).AppendEvents(ctx, connect.NewRequest(&fakv1.AppendEventsRequest{
				SessionId: id, Events: []*fakv1.EventInput{{Kind: "note", Text: big}}}))
			return err
		}, connect.CodeInvalidArgument, "INVALID_ARGUMENT"},
		{"unknown kind", func(ctx context.Context) error {
			_, err := c.Sessions(follower).AppendEvents(ctx, connect.NewRequest(&fakv1.AppendEventsRequest{
				SessionId: id, Events: []*fakv1.EventInput{{Kind: "nonsense", Text: "x"}}}))
			return err
		}, connect.CodeInvalidArgument, "INVALID_ARGUMENT"},
		{"no events", func(ctx context.Context) error {
			_, err := c.Sessions(follower).AppendEvents(ctx, connect.NewRequest(&fakv1.AppendEventsRequest{SessionId: id}))
			return err
		}, connect.CodeInvalidArgument, "INVALID_ARGUMENT"},
		{"missing session id", func(ctx context.Context) error {
			_, err := c.Sessions(follower).StopSession(ctx, connect.NewRequest(&fakv1.StopSessionRequest{}))
			return err
		}, connect.CodeInvalidArgument, "INVALID_ARGUMENT"},
		{"wrong token", func(ctx context.Context) error {
			_, err := wrongToken.CreateSession(ctx, connect.NewRequest(&fakv1.CreateSessionRequest{Title: "x"}))
			return err
		}, connect.CodeUnauthenticated, "UNAUTHENTICATED"},
		{"missing token on a stream", func(ctx context.Context) error {
			s, err := noToken.WatchEvents(ctx, connect.NewRequest(&fakv1.WatchEventsRequest{SessionId: id}))
			if err != nil {
				return err
			}
			defer s.Close()
			for s.Receive() {
			}
			return s.Err()
		}, connect.CodeUnauthenticated, "UNAUTHENTICATED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(ctxT(t, 10*time.Second))
			if connect.CodeOf(err) != tt.code {
				t.Fatalf("code = %v (%v), want %v", connect.CodeOf(err), err, tt.code)
			}
			if got := reasonOf(err); got != tt.reason {
				t.Fatalf("reason = %q, want %q", got, tt.reason)
			}
		})
	}

	// A malformed body (not JSON) through plain HTTP.
	req, _ := http.NewRequest("POST", "http://"+follower.APIAddr+fakv1connect.SessionServiceAppendEventsProcedure, bytes.NewBufferString("{not json"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testcluster.Token)
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("malformed JSON: HTTP %d, want 400 (invalid_argument)", resp.StatusCode)
	}

	if got := leader.Running().Cluster().Raft().LastIndex(); got != lastIndex {
		t.Fatalf("bad input moved the leader's last log index from %d to %d", lastIndex, got)
	}
	s, err := leader.Running().FSM().Session(id)
	// session.created + epoch.changed + the one accepted note.
	if err != nil || s.HeadSeq != 3 {
		t.Fatalf("session head = %v (%v), want 3", s.GetHeadSeq(), err)
	}
}
