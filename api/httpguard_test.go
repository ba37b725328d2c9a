package api

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/fsm"
)

// recordingBody counts the bytes a handler reads from a request body.
type recordingBody struct {
	r    io.Reader
	read atomic.Int64
}

func (b *recordingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *recordingBody) Close() error { return nil }

// guardServer is a node's API over an FSM (no cluster: what these tests
// send is refused or answered before any handler needs one).
func guardServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	f, err := fsm.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if cfg.Tokens == nil {
		cfg.Tokens = []Token{{Secret: "tok-read", Role: RoleRead}, OperatorToken("tok-operator")}
	}
	cfg.NodeName = "n1"
	return New(cfg, nil, f)
}

// gzipBomb is a small gzip body that inflates to n bytes of JSON
// whitespace: what the attacker sent, 16 MB inflated.
func gzipBomb(t testing.TB, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write([]byte("{"))
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	for left := n - 2; left > 0; left -= len(chunk) {
		_, _ = zw.Write(chunk[:min(left, len(chunk))])
	}
	_, _ = zw.Write([]byte("}"))
	_ = zw.Close()
	return buf.Bytes()
}

// TestGuardRefusesUnauthenticatedRPCBeforeReadingItsBody: a call with no
// token, a wrong one or one of too low a role is refused in the shape of
// its protocol, and not one byte of its body is read — a gzip bomb
// included (Connect alone reads and inflates the body before any
// interceptor runs).
func TestGuardRefusesUnauthenticatedRPCBeforeReadingItsBody(t *testing.T) {
	h := guardServer(t, Config{}).Handler()
	bomb := gzipBomb(t, 16_000_000)
	for _, tc := range []struct {
		name, path, token, contentType, encoding string
		body                                     []byte
		status                                   int
		code                                     string
	}{
		{"no token, Connect JSON gzip bomb", "", "", "application/json", "gzip", bomb, 401, "unauthenticated"},
		{"wrong token, Connect proto", "", "nope", "application/proto", "", []byte("0123456789"), 401, "unauthenticated"},
		{"read token on an agent call", "", "tok-read", "application/json", "", []byte("{}"), 403, "permission_denied"},
		{"no token, gRPC", "", "", "application/grpc", "", []byte{0, 0, 0, 0, 0}, 200, "16"},
		{"no token, unknown procedure", "/fak.v1.SessionService/NoSuch", "", "application/json", "gzip", bomb, 401, "unauthenticated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &recordingBody{r: bytes.NewReader(tc.body)}
			path := cmp.Or(tc.path, fakv1connect.SessionServiceCreateSessionProcedure)
			req := httptest.NewRequest(http.MethodPost, path, body)
			req.ContentLength = int64(len(tc.body))
			req.Header.Set("Content-Type", tc.contentType)
			if tc.encoding != "" {
				req.Header.Set("Content-Encoding", tc.encoding)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if n := body.read.Load(); n != 0 {
				t.Fatalf("the refused request's body was read: %d bytes", n)
			}
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			got := rec.Body.String()
			if tc.contentType == "application/grpc" {
				got = rec.Header().Get("Grpc-Status")
			}
			if !strings.Contains(got, tc.code) {
				t.Fatalf("answer %q does not carry %q", got, tc.code)
			}
			if rec.Header().Get("Connection") != "close" {
				t.Fatal("an HTTP/1 refusal keeps the connection, whose body would then be read")
			}
		})
	}
}

// TestGuardRefusesOversizedBodyNamingTheLimit: a body over its procedure's
// limit is resource_exhausted with the limit in the message — refused
// unread when its length is declared, stopped at the limit when not.
func TestGuardRefusesOversizedBodyNamingTheLimit(t *testing.T) {
	h := guardServer(t, Config{}).Handler()
	small := newMessageLimits(DefaultMaxEventBytes).small + wireSlack
	limit := fmt.Sprint(small)
	big := bytes.Repeat([]byte(" "), 2<<20)
	for _, declared := range []bool{true, false} {
		body := &recordingBody{r: bytes.NewReader(big)}
		req := httptest.NewRequest(http.MethodPost, fakv1connect.SessionServiceListSessionsProcedure, body)
		req.ContentLength = -1
		if declared {
			req.ContentLength = int64(len(big))
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer tok-read")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		// Undeclared, Connect's own read limit (the message cap) stops it
		// first.
		if !declared {
			limit = fmt.Sprint(newMessageLimits(DefaultMaxEventBytes).small)
		}
		if !strings.Contains(rec.Body.String(), "resource_exhausted") || !strings.Contains(rec.Body.String(), limit) {
			t.Fatalf("declared=%v: %d %s, want resource_exhausted naming %s bytes", declared, rec.Code, rec.Body, limit)
		}
		if declared && !strings.Contains(rec.Body.String(), ReasonBodyTooLarge) {
			t.Fatalf("declared: %s lacks the reason %s", rec.Body, ReasonBodyTooLarge)
		}
		if n := body.read.Load(); declared && n != 0 || n > small+64<<10 {
			t.Fatalf("declared=%v: %d bytes of the body read", declared, n)
		}
	}
	// A plain HTTP path answers 413.
	req := httptest.NewRequest(http.MethodPost, "/v1/health", bytes.NewReader(big))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), fmt.Sprint(plainBodyMax)) {
		t.Fatalf("plain path: %d %s, want 413 naming %d", rec.Code, rec.Body, plainBodyMax)
	}
}

// TestGuardCapsDecompressedSizeByProcedure: an authenticated gzip bomb
// (15 KB inflating to 16 MB) to a procedure that carries no events stops
// at the small limit instead of inflating under the bulk one.
func TestGuardCapsDecompressedSizeByProcedure(t *testing.T) {
	h := guardServer(t, Config{}).Handler()
	bomb := gzipBomb(t, 16_000_000)
	req := httptest.NewRequest(http.MethodPost, fakv1connect.SessionServiceListSessionsProcedure, bytes.NewReader(bomb))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("Authorization", "Bearer tok-read")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	limit := fmt.Sprint(newMessageLimits(DefaultMaxEventBytes).small)
	if !strings.Contains(rec.Body.String(), "resource_exhausted") || !strings.Contains(rec.Body.String(), limit) {
		t.Fatalf("gzip bomb: %d %s, want resource_exhausted naming %s", rec.Code, rec.Body, limit)
	}
	if got := newMessageLimits(DefaultMaxEventBytes).of(fakv1connect.SessionServiceAppendEventsProcedure); got != 16<<20 {
		t.Fatalf("AppendEvents may carry %d bytes, want the bulk 16 MiB", got)
	}
}

// TestGuardClosesRefusedPlainRequestsUnread: /metrics, the gateway and an
// RPC refuse a caller without a token as soon as its headers are in, and
// close the connection without waiting for the body (net/http would read
// up to 256 KiB of it, however slowly it came, to reuse the connection).
func TestGuardClosesRefusedPlainRequestsUnread(t *testing.T) {
	s := guardServer(t, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.http.Close() })
	for _, path := range []string{"/metrics", "/gateway/openai/v1/chat/completions", fakv1connect.SessionServiceAppendEventsProcedure} {
		method := http.MethodPost
		if path == "/metrics" {
			method = http.MethodGet
		}
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		// The headers announce 60 KB (under every limit) and no byte of
		// it ever comes.
		fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n", method, path)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no answer before the body: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: %d, want 401", path, resp.StatusCode)
		}
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("%s: the connection stayed open after the refusal (read: %v)", path, err)
		}
		conn.Close()
	}
}

// TestGuardTrustsAuthenticatedConnections: a connection becomes trusted
// with its first authenticated call, not with a refused one.
func TestGuardTrustsAuthenticatedConnections(t *testing.T) {
	s := guardServer(t, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.http.Close() })
	hc := &http.Client{Transport: &http.Transport{}}
	get := func(token string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if get("") != 401 || get("tok-read") != 200 {
		t.Fatal("metrics answers")
	}
	if got := gaugeValue(t, s, "trusted"); got != 1 {
		t.Fatalf("%v trusted connections after an authenticated call, want 1", got)
	}
}

func gaugeValue(t *testing.T, s *Server, state string) float64 {
	t.Helper()
	return counterValue(t, s.cfg.Metrics, "fak_api_connections", map[string]string{"state": state})
}

// TestGuardAnswersConnectErrorShape: the early refusal is a Connect error
// clients decode (code and reason), as the interceptor's was.
func TestGuardAnswersConnectErrorShape(t *testing.T) {
	s := guardServer(t, Config{})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	client := fakv1connect.NewSessionServiceClient(srv.Client(), srv.URL)
	_, err := client.ListSessions(t.Context(), connect.NewRequest(&fakv1.ListSessionsRequest{}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("no token: %v, want unauthenticated", err)
	}
}

// BenchmarkGuardRefusal is the handler's CPU for refusing a call with no
// token (a connection's accept and close come on top).
func BenchmarkGuardRefusal(b *testing.B) {
	f, err := fsm.Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	h := New(Config{NodeName: "n1", Tokens: []Token{OperatorToken("tok")}}, nil, f).Handler()
	bomb := gzipBomb(b, 16_000_000)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, fakv1connect.SessionServiceAppendEventsProcedure, bytes.NewReader(bomb))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", "gzip")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}
