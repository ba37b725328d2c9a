package api

import (
	"context"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"
)

// Request ids trace one API call through the logs of every node it touches:
// the client's X-Request-Id when it sends a usable one, else a fresh id, is
// echoed in the response, carried when a follower forwards the call (or its
// read index) to the leader, and logged as request_id. It is not the
// idempotency request_id some request bodies carry: that one keys the FSM's
// deduplication; this one only correlates log lines.
const (
	HeaderRequestID = "X-Request-Id"
	// maxRequestIDBytes bounds a client's id; a longer one is replaced.
	maxRequestIDBytes = 128
)

type requestIDKey struct{}

// RequestID returns the request id of an API call's context ("" outside one).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// validRequestID: 1-maxRequestIDBytes of printable ASCII without spaces, so
// an id cannot forge log fields or response headers.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// withRequestID gives every HTTP request a request id before any handler
// runs: in the context, in the response header, and written back into the
// request's own header so that forwardHeaders carries a generated id too.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(HeaderRequestID)
		if !validRequestID(id) {
			id = NewID("rid_")
			r.Header.Set(HeaderRequestID, id)
		}
		w.Header().Set(HeaderRequestID, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}

// log returns the API logger for a call, with its request id.
func (s *Server) log(ctx context.Context) hclog.Logger {
	if id := RequestID(ctx); id != "" {
		return s.logger.With("request_id", id)
	}
	return s.logger
}

// logCall writes one line per finished RPC: a warning when the server failed
// (the codes a client cannot cause), a debug line otherwise. Headers are
// never logged: they carry the bearer token.
func (s *Server) logCall(ctx context.Context, procedure string, hdr http.Header, code string, d time.Duration, err error) {
	serverFault := false
	switch connect.CodeOf(err) {
	case connect.CodeInternal, connect.CodeUnknown, connect.CodeDataLoss:
		serverFault = err != nil
	}
	if !serverFault && !s.logger.IsDebug() {
		return
	}
	fields := []any{"procedure", procedure, "code", code, "duration", d}
	if by := hdr.Get(headerForwarded); by != "" {
		fields = append(fields, "forwarded_by", by)
	}
	if err != nil {
		fields = append(fields, "error", err)
	}
	if serverFault {
		s.log(ctx).Warn("request failed", fields...)
		return
	}
	s.log(ctx).Debug("request", fields...)
}
