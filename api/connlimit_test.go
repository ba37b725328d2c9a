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

// limiterFor is a limiter over no listener, with a clock the test moves.
func limiterFor(lim Limits) (l *connLimiter, admit func(from string) (*fakeConn, *trackedConn), now *time.Time) {
	l = newConnLimiter(nil, lim, newConnMetrics(prometheus.NewRegistry()))
	t0 := time.Unix(1000, 0)
	now = &t0
	l.now = func() time.Time { return *now }
	return l, func(from string) (*fakeConn, *trackedConn) {
		c := &fakeConn{from: from}
		return c, l.admit(c)
	}, now
}

func closed(tc *trackedConn) bool { return tc.Conn.(*fakeConn).closed }

// TestConnLimiterClosesUntrustedFirst: past a cap, the oldest idle
// connection that has not authenticated is closed to make room — of the
// same address for a per-address cap, of any for the total; trusted and
// busy connections are never closed, and with nothing to close the new
// connection is refused. The untrusted cap of an address spares a burst
// younger than the grace.
func TestConnLimiterClosesUntrustedFirst(t *testing.T) {
	t.Run("untrusted per address", func(t *testing.T) {
		_, admit, now := limiterFor(Limits{MaxConns: 10, MaxConnsPerAddr: 10, MaxUntrustedConnsPerAddr: 2})
		_, a1 := admit("10.0.0.2")
		a1.trust()
		_, a2 := admit("10.0.0.2")
		_, a3 := admit("10.0.0.2")
		_, a4 := admit("10.0.0.2")
		if a4 == nil || closed(a2) {
			t.Fatal("a burst younger than the grace was cut")
		}
		_ = a4.Close()
		*now = now.Add(untrustedGrace)
		_, a4 = admit("10.0.0.2")
		if a4 == nil || !closed(a2) || closed(a3) || closed(a1) {
			t.Fatal("past the grace, the oldest untrusted connection (a2) did not make room")
		}
		// Another address is not affected.
		if _, b1 := admit("10.0.0.3"); b1 == nil || closed(a3) {
			t.Fatal("another address paid for the first one's cap")
		}
	})
	t.Run("per address, whatever the age", func(t *testing.T) {
		_, admit, _ := limiterFor(Limits{MaxConns: 10, MaxConnsPerAddr: 3, MaxUntrustedConnsPerAddr: 3})
		_, x1 := admit("10.0.0.2")
		x1.trust()
		_, x2 := admit("10.0.0.2")
		x2.trust()
		_, x3 := admit("10.0.0.2")
		if _, x4 := admit("10.0.0.2"); x4 == nil || !closed(x3) || closed(x1) || closed(x2) {
			t.Fatal("at the per-address cap, the untrusted x3 did not make room")
		}
	})
	t.Run("total", func(t *testing.T) {
		l, admit, _ := limiterFor(Limits{MaxConns: 3, MaxConnsPerAddr: 3, MaxUntrustedConnsPerAddr: 3})
		_, y1 := admit("10.0.0.1")
		y1.trust()
		_, y2 := admit("10.0.0.2")
		_, y3 := admit("10.0.0.3")
		_, y4 := admit("10.0.0.4")
		if y4 == nil || !closed(y2) {
			t.Fatal("at the total cap, the oldest untrusted connection anywhere (y2) did not make room")
		}
		// y3 and y4 busy in a request, y1 trusted: nothing may go, so
		// a new connection is refused.
		y3.begin()
		y4.begin()
		if raw, y5 := admit("10.0.0.5"); y5 != nil || raw.closed {
			t.Fatalf("with every connection trusted or busy, a new one was admitted (%v)", y5 != nil)
		}
		if closed(y1) {
			t.Fatal("the trusted connection was closed")
		}
		// A request ends: y3 is idle and untrusted again, and goes first.
		y3.end()
		_, y6 := admit("10.0.0.6")
		if y6 == nil || !closed(y3) {
			t.Fatal("an idle untrusted connection did not make room")
		}
		for _, c := range []*trackedConn{y1, y4, y6} {
			_ = c.Close()
		}
		if l.total != 0 || len(l.byAddr) != 0 || l.idle.Len() != 0 {
			t.Fatalf("after closing all, %d counted in %d addresses, %d idle", l.total, len(l.byAddr), l.idle.Len())
		}
	})
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
