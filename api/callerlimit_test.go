package api

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// A caller with max calls in flight gets TOO_MANY_CALLS for the next one;
// another caller does not; once one call ends the first caller is served
// again.
func TestCallerLimit(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 8)
	next := connect.UnaryFunc(func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Header().Get("X-Block") != "" {
			started <- struct{}{}
			<-release
		}
		return connect.NewResponse(&fakv1.DescribeSessionResponse{}), nil
	})
	call := connect.UnaryFunc(newCallerLimit(2).WrapUnary(next))
	req := func(token string, block bool) connect.AnyRequest {
		r := connect.NewRequest(&fakv1.DescribeSessionRequest{})
		r.Header().Set("Authorization", "Bearer "+token)
		if block {
			r.Header().Set("X-Block", "1")
		}
		return r
	}
	done := make(chan error, 2)
	for range 2 {
		go func() { _, err := call(context.Background(), req("alice", true)); done <- err }()
		<-started
	}
	_, err := call(context.Background(), req("alice", false))
	if connect.CodeOf(err) != connect.CodeResourceExhausted || apiclient.ErrorInfo(err).GetReason() != ReasonTooManyCalls {
		t.Fatalf("alice's third call: %v, want RESOURCE_EXHAUSTED %s", err, ReasonTooManyCalls)
	}
	if _, err := call(context.Background(), req("bob", false)); err != nil {
		t.Fatalf("bob is limited by alice's calls: %v", err)
	}
	release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := call(context.Background(), req("alice", false)); err != nil {
		t.Fatalf("alice after a call ended: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
