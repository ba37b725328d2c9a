package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	"github.com/fak-dev/fak/api/gateway"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/api/web"
)

// ReasonBodyTooLarge: a request's body is over its procedure's limit
// (resource_exhausted; 413 on plain HTTP). The message names the limit.
const ReasonBodyTooLarge = "REQUEST_TOO_LARGE"

// Limits bound what one request and one remote address may hold of a
// node (issue 32). Zero fields take the defaults below.
type Limits struct {
	// MaxConns bounds the node's open API connections (default: half its
	// descriptor limit, between 64 and 16,384).
	MaxConns int
	// MaxConnsPerAddr bounds one remote address's connections, trusted or
	// not (default: MaxConns/2: a peer forwarding many calls over HTTP/1.1
	// must not be throttled, but no one address may hold the whole node).
	MaxConnsPerAddr int
	// MaxUntrustedConnsPerAddr bounds one address's connections that have
	// not yet authenticated (default DefaultMaxUntrustedConnsPerAddr).
	MaxUntrustedConnsPerAddr int
	// BodyTimeout: a request's body must have arrived within it (default
	// DefaultBodyTimeout). Streams the client sends (a snapshot restore)
	// are exempt; a watch's request is small and read at once.
	BodyTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle that long (default
	// DefaultIdleTimeout).
	IdleTimeout time.Duration
}

const (
	// DefaultBodyTimeout: 16 MiB (the largest body) at 560 KB/s.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultIdleTimeout is above the 90 s after which fak's clients drop
	// an idle connection themselves, so a pooled connection is closed by
	// its client, never reused in the instant the server closes it.
	DefaultIdleTimeout = 120 * time.Second
	// headerTimeout bounds a request's headers (and a TLS handshake).
	headerTimeout = 10 * time.Second
	// maxHeaderBytes bounds a request's headers (net/http's default is 1
	// MiB, held per connection before anything is authenticated); fak's
	// clients, the page and the provider SDKs send a few KiB.
	maxHeaderBytes = 64 << 10
	// plainBodyMax bounds bodies nothing here reads: health, the page,
	// /metrics, unknown paths.
	plainBodyMax = 64 << 10
	// wireSlack is what a request's wire may add to its message: the
	// envelope prefix, gzip's framing of incompressible data.
	wireSlack = 64 << 10
	// gatewayBodyMax is the gateway's own bound on a model call
	// (api/gateway's maxRequestBody); the gateway does not decompress.
	gatewayBodyMax = 64 << 20
)

func (l Limits) withDefaults() Limits {
	if l.MaxConns <= 0 {
		l.MaxConns = defaultMaxConns()
	}
	if l.MaxConnsPerAddr <= 0 {
		l.MaxConnsPerAddr = max(l.MaxConns/2, 1)
	}
	if l.MaxUntrustedConnsPerAddr <= 0 {
		l.MaxUntrustedConnsPerAddr = min(DefaultMaxUntrustedConnsPerAddr, l.MaxConnsPerAddr)
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = DefaultBodyTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	return l
}

// bulkProcedures carry up to fsm.MaxEventsPerAppend events: they get the
// bulk message limit; every other procedure's request holds at most one
// event's text and data (an Act's input) and gets the small one.
var bulkProcedures = []string{
	fakv1connect.SessionServiceAppendEventsProcedure,
	fakv1connect.RunnerServiceAppendRunnerEventsProcedure,
}

// clientStreams are procedures whose request is a stream of messages
// (each within the small limit): no cap on the whole body and no body
// deadline, as a restore may take minutes. Both need a token.
var clientStreams = map[string]bool{
	fakv1connect.OperatorServiceSnapshotRestoreProcedure:                  true,
	"/" + grpcreflect.ReflectV1ServiceName + "/ServerReflectionInfo":      true,
	"/" + grpcreflect.ReflectV1AlphaServiceName + "/ServerReflectionInfo": true,
}

// messageLimits are the decompressed message caps: small for most
// procedures, bulk for bulkProcedures.
type messageLimits struct{ small, bulk int64 }

func newMessageLimits(maxEventBytes int) messageLimits {
	return messageLimits{
		// One event's text + data plus the rest of its request.
		small: int64(maxEventBytes) + 64<<10,
		// Requests may carry up to 1000 events; an oversized event gets
		// INVALID_ARGUMENT (our check) rather than a transport error.
		bulk: int64(max(4*maxEventBytes, 16<<20)),
	}
}

func (m messageLimits) of(procedure string) int64 {
	for _, p := range bulkProcedures {
		if p == procedure {
			return m.bulk
		}
	}
	return m.small
}

// httpGuard runs before Connect, which reads and decompresses a whole
// body before any interceptor: it authenticates an RPC from its headers
// and refuses it without reading the body, caps the body by procedure,
// bounds how long the body may take, and tells the connection limiter
// which connections have authenticated.
type httpGuard struct {
	auth     *authInterceptor
	limits   Limits
	messages messageLimits
	errors   *connect.ErrorWriter
	metrics  *connMetrics
	// observe counts and logs a refused call as the call interceptor
	// counts and logs every other (callInterceptor.end).
	observe func(ctx context.Context, procedure string, hdr http.Header, start time.Time, err error)
	next    http.Handler
}

// pathKind is what a request path is to the guard.
type pathKind int

const (
	kindRPC    pathKind = iota // a fak procedure (or any /fak.v1. path), reflection
	kindPublic                 // health, gRPC health, the page's static files
	kindPlain                  // /metrics and the gateway: they check credentials themselves, before reading
	kindOther                  // anything else: the mux answers 404
)

func classify(path string) pathKind {
	switch {
	case strings.HasPrefix(path, "/fak.v1."), strings.HasPrefix(path, "/grpc.reflection."):
		return kindRPC
	case path == "/v1/health", path == "/v1/health/ready", strings.HasPrefix(path, web.Prefix),
		strings.HasPrefix(path, "/"+grpchealth.HealthV1ServiceName+"/"):
		return kindPublic
	case path == "/metrics", strings.HasPrefix(path, gateway.Prefix):
		return kindPlain
	}
	return kindOther
}

func (g *httpGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tc := connOf(r.Context())
	if tc != nil {
		tc.begin()
		defer tc.end()
		// With mutual TLS the handshake verified a certificate of the
		// fleet's CA: the connection is the fleet's, whatever its token
		// may do (bearer tokens still decide that).
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			tc.trust()
		}
	}
	start := time.Now()
	path := r.URL.Path
	kind := classify(path)
	refuse := func(err error) {
		// Only procedures of the role table: the labels stay bounded
		// whatever paths a caller invents.
		if _, known := requiredRole(path); kind == kindRPC && known && g.observe != nil {
			g.observe(r.Context(), path, r.Header, start, err)
		}
		g.refuse(w, r, err)
	}
	var wireMax int64 = plainBodyMax
	deadline := true
	switch kind {
	case kindRPC:
		// The interceptor's check, on the headers alone: with auth on a
		// token of the procedure's role. A path the role table does not
		// know needs a valid token only, and then meets the mux's 404 (or
		// the interceptor's refusal) as before.
		if _, known := requiredRole(path); known {
			role, err := g.auth.authorize(path, r.Header)
			if err != nil {
				refuse(err)
				return
			}
			r = r.WithContext(withGuardRole(r.Context(), path, role))
		} else if err := g.auth.check(r.Header); err != nil {
			refuse(err)
			return
		}
		if tc != nil {
			tc.trust()
		}
		if clientStreams[path] {
			wireMax, deadline = 0, false
		} else {
			wireMax = g.messages.of(path) + wireSlack
		}
	case kindPlain:
		if strings.HasPrefix(path, gateway.Prefix) {
			wireMax = gatewayBodyMax
		}
	}
	if wireMax > 0 && r.ContentLength > wireMax {
		refuse(newError(connect.CodeResourceExhausted, &fakv1.ErrorInfo{Reason: ReasonBodyTooLarge},
			fmt.Sprintf("request body of %d bytes is over the limit of %d bytes for %s", r.ContentLength, wireMax, path)))
		return
	}
	body := &guardedBody{}
	if r.Body != nil && r.Body != http.NoBody {
		rc := r.Body
		if wireMax > 0 {
			// Given the server's own writer, it also closes the
			// connection once the limit is hit.
			rc = http.MaxBytesReader(w, rc, wireMax)
		}
		body.ReadCloser = rc
		if deadline {
			body.rc = http.NewResponseController(w)
			// Lifted once the body is in (guardedBody; net/http does it
			// too for HTTP/1), so a long call or a watch is not cut.
			_ = body.rc.SetReadDeadline(time.Now().Add(g.limits.BodyTimeout))
		}
		r.Body = body
	} else {
		body.done.Store(true)
	}
	// Connect reads an RPC's body before it answers; the other handlers
	// may answer without reading it (a refusal, a 404).
	if http1 := r.ProtoMajor == 1; kind != kindRPC && (http1 || kind == kindPlain) {
		w = &guardedWriter{ResponseWriter: w, body: body, conn: tc, http1: http1, trustOnPass: kind == kindPlain}
	}
	g.next.ServeHTTP(w, r)
}

// refuse answers err before reading the request's body: in the RPC
// protocol's shape when it is one (a trailers-only gRPC status, Connect's
// JSON error), else plain JSON; and over HTTP/1 it closes the connection
// rather than read the body to reuse it.
func (g *httpGuard) refuse(w http.ResponseWriter, r *http.Request, err error) {
	ce, ok := err.(*connect.Error)
	if !ok {
		ce = connect.NewError(connect.CodeInternal, err)
	}
	reason := "INTERNAL"
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*fakv1.ErrorInfo); ok {
				reason = info.GetReason()
			}
		}
	}
	g.metrics.refused.WithLabelValues(reason).Inc()
	if r.ProtoMajor == 1 {
		dropUnreadBody(w)
	}
	if g.errors.IsSupported(r) {
		_ = g.errors.Write(w, r, ce)
		return
	}
	status := http.StatusInternalServerError
	switch ce.Code() {
	case connect.CodeUnauthenticated:
		status = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", "Bearer")
	case connect.CodePermissionDenied:
		status = http.StatusForbidden
	case connect.CodeResourceExhausted:
		status = http.StatusRequestEntityTooLarge
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": ce.Message(), "reason": reason})
}

// dropUnreadBody makes an HTTP/1 connection close after this answer
// without reading the rest of the request's body: net/http reads up to
// 256 KiB of it after the handler (to reuse the connection) however
// slowly it comes, even when the answer says close — unless the read
// deadline has passed.
func dropUnreadBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// guardedBody is a request body that lifts the body deadline once read.
type guardedBody struct {
	io.ReadCloser
	rc   *http.ResponseController // nil: no deadline to lift
	done atomic.Bool              // read to its end, or failed
}

func (b *guardedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.done.Swap(true) && b.rc != nil && err == io.EOF {
		// Only at the end: after a timeout the deadline must stay
		// passed, or a later read to discard the rest would wait for
		// the client forever.
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// guardedWriter watches a plain handler's answer: one written before the
// body was read closes an HTTP/1 connection (net/http would otherwise
// wait for up to 256 KiB of it, however slowly it comes), and a handler
// that accepted the caller's credentials marks the connection trusted.
type guardedWriter struct {
	http.ResponseWriter
	body        *guardedBody
	conn        *trackedConn
	http1       bool
	trustOnPass bool
	wrote       bool
}

func (w *guardedWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if w.http1 && !w.body.done.Load() {
			dropUnreadBody(w.ResponseWriter)
		}
		if w.trustOnPass && w.conn != nil && code != http.StatusUnauthorized && code != http.StatusForbidden {
			w.conn.trust()
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *guardedWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Flush and Unwrap keep streaming answers (the gateway's server-sent
// events) working through the wrapper.
func (w *guardedWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *guardedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// guardRoleKey keys, in a request's context, the role the guard
// authorized its procedure with, so the interceptor need not look the
// token up again.
type guardRoleKey struct{}

type guardRole struct {
	procedure string
	role      fakv1.Role
}

func withGuardRole(ctx context.Context, procedure string, role fakv1.Role) context.Context {
	return context.WithValue(ctx, guardRoleKey{}, guardRole{procedure, role})
}

// guardedRole is the role the guard authorized procedure with in ctx.
func guardedRole(ctx context.Context, procedure string) (fakv1.Role, bool) {
	g, ok := ctx.Value(guardRoleKey{}).(guardRole)
	if !ok || g.procedure != procedure {
		return 0, false
	}
	return g.role, true
}
