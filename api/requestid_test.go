package api

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"
)

func TestValidRequestID(t *testing.T) {
	for id, want := range map[string]bool{
		"abc":                    true,
		"req-1_2.3:4/5":          true,
		"":                       false,
		"has space":              false,
		"new\nline":              false,
		"tab\t":                  false,
		"ünïcode":                false,
		strings.Repeat("a", 128): true,
		strings.Repeat("a", 129): false,
	} {
		if got := validRequestID(id); got != want {
			t.Errorf("validRequestID(%q) = %v, want %v", id, got, want)
		}
	}
}

// serveRequestID runs withRequestID over a handler that reports what it saw.
func serveRequestID(t *testing.T, sent string) (ctxID, hdrID, respID string) {
	t.Helper()
	h := withRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctxID, hdrID = RequestID(r.Context()), r.Header.Get(HeaderRequestID)
	}))
	req := httptest.NewRequest("GET", "/x", nil)
	if sent != "" {
		req.Header.Set(HeaderRequestID, sent)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return ctxID, hdrID, rec.Header().Get(HeaderRequestID)
}

func TestWithRequestIDKeepsClientID(t *testing.T) {
	ctxID, hdrID, respID := serveRequestID(t, "abc-123")
	if ctxID != "abc-123" || hdrID != "abc-123" || respID != "abc-123" {
		t.Fatalf("context %q, request header %q, response header %q; want abc-123 everywhere", ctxID, hdrID, respID)
	}
}

func TestWithRequestIDReplacesMissingOrBadID(t *testing.T) {
	for _, sent := range []string{"", "bad id", strings.Repeat("x", maxRequestIDBytes+1)} {
		ctxID, hdrID, respID := serveRequestID(t, sent)
		if !strings.HasPrefix(ctxID, "rid_") || hdrID != ctxID || respID != ctxID {
			t.Fatalf("sent %q: context %q, request header %q, response header %q; want one fresh rid_ id", sent, ctxID, hdrID, respID)
		}
	}
	a, _, _ := serveRequestID(t, "")
	b, _, _ := serveRequestID(t, "")
	if a == b {
		t.Fatalf("two requests got the same fresh id %q", a)
	}
}

func TestForwardHeadersCarryRequestID(t *testing.T) {
	s := &Server{cfg: Config{NodeName: "n2"}}
	src := http.Header{}
	src.Set("Authorization", "Bearer t")
	src.Set(HeaderRequestID, "abc")
	dst := http.Header{}
	s.forwardHeaders(dst, src)
	if dst.Get(HeaderRequestID) != "abc" || dst.Get("Authorization") != "Bearer t" || dst.Get(headerForwarded) != "n2" {
		t.Fatalf("forwarded headers %v", dst)
	}
}

func TestCallLogCarriesRequestID(t *testing.T) {
	var buf bytes.Buffer
	s := newTestServer(t, hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &buf}))
	call := callInterceptor{s}.WrapUnary(func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) {
		return nil, connect.NewError(connect.CodeInternal, errors.New("boom"))
	})
	ctx := context.WithValue(context.Background(), requestIDKey{}, "abc-123")
	req := connect.NewRequest(&struct{}{})
	req.Header().Set("Authorization", "Bearer secret-token-value")
	if _, err := call(ctx, req); err == nil {
		t.Fatal("want the handler's error")
	}
	out := buf.String()
	if !strings.Contains(out, "request_id=abc-123") || !strings.Contains(out, "[WARN]") || !strings.Contains(out, "code=internal") {
		t.Fatalf("log lacks the request id, level or code:\n%s", out)
	}
	if strings.Contains(out, "secret-token-value") {
		t.Fatalf("log holds the bearer token:\n%s", out)
	}
}
