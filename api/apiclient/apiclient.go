// Package apiclient is the client side of the fak API that every caller
// shares: fakctl, node-to-node forwarding and the test harnesses. It holds
// the HTTP client (unary calls over HTTP/1.1, streams over HTTP/2) and the
// bearer-token interceptor, and imports nothing of fak's server side, so
// fakctl stays small.
package apiclient

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
)

// NewHTTPClient returns the HTTP client fak's callers share: unary calls
// over HTTP/1.1 and streams over HTTP/2 without TLS (h2c), as fak nodes
// serve both (see splitTransport).
func NewHTTPClient() *http.Client { return NewHTTPClientDialer(nil) }

// NewHTTPClientDialer is NewHTTPClient with a custom dial function (nil:
// the default), e.g. to dial from a fixed source address.
func NewHTTPClientDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	unary := &http.Transport{MaxIdleConnsPerHost: 128, IdleConnTimeout: 90 * time.Second, DialContext: dial}
	unary.Protocols = new(http.Protocols)
	unary.Protocols.SetHTTP1(true)
	streams := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second, DialContext: dial}
	streams.Protocols = new(http.Protocols)
	streams.Protocols.SetHTTP2(true)
	streams.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &splitTransport{unary: unary, streams: streams}}
}

// splitTransport sends Connect's unary calls over HTTP/1.1 and everything
// else (server and bidi streams, gRPC) over HTTP/2. A unary call is one
// request and one answer, and HTTP/1.1 answers from the handler's own
// goroutine; HTTP/2 passes every frame between the connection's reader,
// writer and the handler. Measured on an in-process fleet (docs/speed.md):
// one client's append p50 0.06–0.19 ms lower, 64 clients' rate about 5%
// higher. Streams need HTTP/2 (bidi), and many share its one connection.
type splitTransport struct{ unary, streams *http.Transport }

func (t *splitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if isStream(r) {
		return t.streams.RoundTrip(r)
	}
	return t.unary.RoundTrip(r)
}

// CloseIdleConnections closes both pools' idle connections
// (http.Client.CloseIdleConnections calls it).
func (t *splitTransport) CloseIdleConnections() {
	t.unary.CloseIdleConnections()
	t.streams.CloseIdleConnections()
}

// setTLS gives each pool its own copy of cfg for https addresses: the
// HTTP/2 pool adds "h2" to its copy's ALPN list, which the HTTP/1.1 pool
// must not offer.
func (t *splitTransport) setTLS(cfg *tls.Config) {
	t.unary.TLSClientConfig = cfg.Clone()
	if t.unary.TLSClientConfig != nil {
		t.unary.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	t.streams.TLSClientConfig = cfg.Clone()
}

// isStream reports a call of the Connect streaming protocol or of gRPC
// (by content type); Connect's unary calls are application/proto or
// application/json, or a GET.
func isStream(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return strings.HasPrefix(ct, "application/connect+") || strings.HasPrefix(ct, "application/grpc")
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
