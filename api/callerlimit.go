package api

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"sync"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// ReasonTooManyCalls: a caller already has MaxCallsPerCaller unary calls
// in flight on this node; it should wait for one to finish.
const ReasonTooManyCalls = "TOO_MANY_CALLS"

// DefaultMaxCallsPerCaller bounds one caller's unary calls in flight on a
// node: far above what a client, `fakctl bench` (64 at once) or a node's
// own runner needs, low enough that one caller cannot hold every
// goroutine and connection of the node while others wait.
const DefaultMaxCallsPerCaller = 1024

// callerLimit refuses a unary call when its caller — the bearer token it
// presents, or without one its IP address — already has max calls in
// flight here. Streams (watches) are long-lived by design and not counted.
type callerLimit struct {
	max int

	mu       sync.Mutex
	inflight map[[sha256.Size]byte]int
}

func newCallerLimit(max int) *callerLimit {
	return &callerLimit{max: max, inflight: map[[sha256.Size]byte]int{}}
}

// caller identifies whoever makes req.
func caller(req connect.AnyRequest) [sha256.Size]byte {
	if auth := req.Header().Get("Authorization"); auth != "" {
		return sha256.Sum256([]byte("token\x00" + auth))
	}
	host, _, err := net.SplitHostPort(req.Peer().Addr)
	if err != nil {
		host = req.Peer().Addr
	}
	return sha256.Sum256([]byte("addr\x00" + host))
}

func (l *callerLimit) acquire(who [sha256.Size]byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight[who] >= l.max {
		return false
	}
	l.inflight[who]++
	return true
}

func (l *callerLimit) release(who [sha256.Size]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight[who]--; l.inflight[who] <= 0 {
		delete(l.inflight, who)
	}
}

func (l *callerLimit) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if l.max <= 0 || req.Spec().IsClient {
			return next(ctx, req)
		}
		who := caller(req)
		if !l.acquire(who) {
			return nil, newError(connect.CodeResourceExhausted, &fakv1.ErrorInfo{Reason: ReasonTooManyCalls},
				fmt.Sprintf("this caller already has %d calls in flight on this node; retry when one has finished", l.max))
		}
		defer l.release(who)
		return next(ctx, req)
	}
}

func (l *callerLimit) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (l *callerLimit) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
