// Package apiclient is the client side of the fak API that every caller
// shares: fakctl, node-to-node forwarding and the test harnesses. It holds
// the h2c HTTP client and the bearer-token interceptor, and imports nothing
// of fak's server side, so fakctl stays small.
package apiclient

import (
	"context"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
)

// NewHTTPClient returns an HTTP client that speaks HTTP/2 without TLS (h2c),
// as fak nodes serve it, so server streams and many concurrent calls share
// one connection per node.
func NewHTTPClient() *http.Client { return NewHTTPClientDialer(nil) }

// NewHTTPClientDialer is NewHTTPClient with a custom dial function (nil:
// the default), e.g. to dial from a fixed source address.
func NewHTTPClientDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	t := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second, DialContext: dial}
	t.Protocols = new(http.Protocols)
	t.Protocols.SetHTTP2(true)
	t.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: t}
}

// Bearer returns an interceptor that sends token as a bearer token on every
// unary and streaming call.
func Bearer(token string) connect.Interceptor { return bearer(func() string { return token }) }

// BearerFunc is Bearer with the token read at each call (a node's own
// token, which a reload of its tokens file may change); "" sends none.
func BearerFunc(token func() string) connect.Interceptor { return bearer(token) }

type bearer func() string

func (b bearer) set(h http.Header) {
	if t := b(); t != "" {
		h.Set("Authorization", "Bearer "+t)
	}
}

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			b.set(req.Header())
		}
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		b.set(conn.RequestHeader())
		return conn
	}
}

// WrapStreamingHandler is a no-op: this interceptor is for callers.
func (bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
