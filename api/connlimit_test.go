package api

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

// fakeConn is a connection from a given address that records its close.
type fakeConn struct {
	net.Conn
	from   string
	closed bool
}

func (c *fakeConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.ParseIP(c.from), Port: 1234}
}
func (c *fakeConn) Close() error { c.closed = true; return nil }

// TestConnLimiterClosesUntrustedFirst: past a cap, the oldest idle
// connection that has not authenticated is closed to make room — of the
// same address for a per-address cap, of any for the total; trusted and
// busy connections are never closed, and with nothing to close the new
// connection is refused.
func TestConnLimiterClosesUntrustedFirst(t *testing.T) {
	l := newConnLimiter(nil, Limits{MaxConns: 4, MaxConnsPerAddr: 3, MaxUntrustedConnsPerAddr: 2}, newConnMetrics(prometheus.NewRegistry()))
	admit := func(from string) (*fakeConn, *trackedConn) {
		c := &fakeConn{from: from}
		return c, l.admit(c)
	}
	_, a1 := admit("10.0.0.2")
	a1.trust()
	a2raw, _ := admit("10.0.0.2")
	_, a3 := admit("10.0.0.2")
	// Per address: a2 and a3 are untrusted (2, the cap): a4 closes a2,
	// the oldest.
	_, a4 := admit("10.0.0.2")
	if a4 == nil || !a2raw.closed {
		t.Fatalf("a4 admitted %v, a2 closed %v: want a4 in and a2 (oldest untrusted) out", a4 != nil, a2raw.closed)
	}
	// Total (4): b1 fills it, b2 closes a3, the oldest untrusted anywhere.
	_, b1 := admit("10.0.0.3")
	if b1 == nil || l.total != 4 {
		t.Fatalf("b1 %v, total %d", b1 != nil, l.total)
	}
	_, b2 := admit("10.0.0.3")
	if b2 == nil || !a3.Conn.(*fakeConn).closed {
		t.Fatal("b2 did not take the place of a3, the oldest untrusted connection")
	}
	// Left: a1 (trusted), a4, b1, b2 — the last three busy in a request:
	// nothing may be closed, so a new connection is refused.
	a4.begin()
	b1.begin()
	b2.begin()
	if c1raw, c1 := admit("10.0.0.4"); c1 != nil || c1raw.closed {
		t.Fatalf("with every connection trusted or busy, a new one was admitted (%v)", c1 != nil)
	}
	if a1.Conn.(*fakeConn).closed {
		t.Fatal("the trusted connection was closed")
	}
	// A request ends: b1 is idle and untrusted again, and goes first.
	b1.end()
	if _, c2 := admit("10.0.0.4"); c2 == nil || !b1.Conn.(*fakeConn).closed {
		t.Fatal("an idle untrusted connection did not make room")
	}
	_ = a4.Close()
	_ = b2.Close()
	_ = a1.Close()
	if l.total != 1 || len(l.byAddr) != 1 {
		t.Fatalf("after closing, %d counted in %d addresses, want 1 in 1", l.total, len(l.byAddr))
	}
}

// TestGuardBodyDeadline: an authenticated body that trickles is cut at
// the body deadline, and the connection closed.
func TestGuardBodyDeadline(t *testing.T) {
	s := guardServer(t, Config{Limits: Limits{BodyTimeout: 300 * time.Millisecond}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.http.Close() })
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-read\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", fakv1connect.SessionServiceListSessionsProcedure)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a trickling body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(b), "code") {
		t.Fatalf("trickling body: %d %s", resp.StatusCode, b)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("connection still open after the body deadline: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cut after %v, want about the 300 ms deadline", d)
	}
}
