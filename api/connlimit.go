package api

import (
	"container/list"
	"context"
	"crypto/tls"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Connection limits (issue 32). A connection is *untrusted* from its accept
// until one of its requests passes authentication (a bearer token, or any
// known procedure with auth off); then it is *trusted* for its life. The
// untrusted ones cost an attacker nothing, so they are capped per remote
// address at a small figure and are the first to go when any cap is hit;
// trusted ones — a peer forwarding hundreds of calls over HTTP/1.1, the
// node's own runner, a client's pool — only count against generous caps.
const (
	// DefaultMaxUntrustedConnsPerAddr: what one address may hold open
	// before authenticating. Browsers open 6 per host; apiclient's pool of
	// 128 becomes trusted within a round trip of each dial.
	DefaultMaxUntrustedConnsPerAddr = 64
	// maxConnsCeiling bounds the default total on hosts whose descriptor
	// limit is huge: past it, memory per connection matters more.
	maxConnsCeiling = 16384
	// minMaxConns keeps a node usable when its descriptor limit is tiny.
	minMaxConns = 64
	// untrustedGrace: the per-address cap on untrusted connections closes
	// none younger than this. A client's burst of new connections sends
	// its headers within milliseconds, so it is never cut for being a
	// burst; the connections an attacker keeps open grow older than this
	// and go. (The per-address and total caps close any untrusted one.)
	untrustedGrace = time.Second
)

// defaultMaxConns is half the process's descriptor limit (RLIMIT_NOFILE,
// which Go raises to the hard limit at start): the other half stays for
// Raft, gossip, the data files and calls to peers. A node at 1,024
// descriptors accepts 512 API connections.
func defaultMaxConns() int {
	var rl syscall.Rlimit
	n := 1024
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur > 0 {
		// Unlimited (RLIM_INFINITY) is past any ceiling.
		n = int(min(rl.Cur, 1<<31))
	}
	return min(max(n/2, minMaxConns), maxConnsCeiling)
}

// connLimiter is the API's listener: it accepts a connection only within
// the caps, making room by closing the oldest idle untrusted connection
// (of the same address for a per-address cap, of any for the total);
// when there is none to close, the new connection is closed instead. Past
// the untrusted cap of an address, only one older than untrustedGrace is
// closed; while all are younger the address may exceed it, within its
// total cap.
type connLimiter struct {
	net.Listener
	maxConns, maxPerAddr, maxUntrustedPerAddr int
	metrics                                   *connMetrics
	now                                       func() time.Time

	mu     sync.Mutex
	total  int
	byAddr map[string]*addrConns
	idle   *list.List // idle untrusted connections, oldest first
}

// addrConns counts one remote address's connections.
type addrConns struct {
	total, untrusted int
	idle             *list.List // its idle untrusted connections, oldest first
}

// trackedConn is a connection the limiter counts. Its state changes under
// the limiter's lock.
type trackedConn struct {
	net.Conn
	l        *connLimiter
	addr     string
	accepted time.Time

	trusted  bool
	active   int           // requests in a handler (HTTP/2 multiplexes)
	idleElem *list.Element // in l.idle while untrusted and not active
	addrElem *list.Element // in its addrConns.idle likewise
	released bool
}

func newConnLimiter(ln net.Listener, lim Limits, m *connMetrics) *connLimiter {
	m.max.Set(float64(lim.MaxConns))
	return &connLimiter{
		Listener: ln, maxConns: lim.MaxConns, maxPerAddr: lim.MaxConnsPerAddr,
		maxUntrustedPerAddr: lim.MaxUntrustedConnsPerAddr, metrics: m, now: time.Now,
		byAddr: map[string]*addrConns{}, idle: list.New(),
	}
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := l.admit(c); tc != nil {
			return tc, nil
		}
		l.metrics.closed.WithLabelValues("refused").Inc()
		_ = c.Close()
	}
}

func remoteHost(c net.Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// admit counts c in, closing older untrusted connections to make room;
// nil when the caps are full of trusted or busy connections.
func (l *connLimiter) admit(c net.Conn) *trackedConn {
	addr := remoteHost(c)
	var evict []*trackedConn
	l.mu.Lock()
	a := l.byAddr[addr]
	if a == nil {
		a = &addrConns{idle: list.New()}
		l.byAddr[addr] = a
	}
	ok := true
	now := l.now()
	if a.untrusted >= l.maxUntrustedPerAddr {
		if oldest := a.idle.Front(); oldest != nil && now.Sub(oldest.Value.(*trackedConn).accepted) >= untrustedGrace {
			l.evictLocked(a.idle, &evict)
		}
	}
	if a.total >= l.maxPerAddr {
		ok = l.evictLocked(a.idle, &evict)
	}
	if ok && l.total >= l.maxConns {
		ok = l.evictLocked(l.idle, &evict)
	}
	var tc *trackedConn
	if ok {
		// An eviction may have emptied (and dropped) a's entry.
		l.byAddr[addr] = a
		tc = &trackedConn{Conn: c, l: l, addr: addr, accepted: now}
		l.total++
		a.total++
		a.untrusted++
		tc.idleElem = l.idle.PushBack(tc)
		tc.addrElem = a.idle.PushBack(tc)
		l.metrics.untrusted.Inc()
	} else if a.total == 0 {
		delete(l.byAddr, addr)
	}
	l.mu.Unlock()
	for _, e := range evict {
		l.metrics.closed.WithLabelValues("evicted").Inc()
		_ = e.Conn.Close()
	}
	return tc
}

// evictLocked releases the oldest connection of idle (a list of idle
// untrusted connections) and adds it to evict, to be closed once the
// lock is dropped; false when idle is empty.
func (l *connLimiter) evictLocked(idle *list.List, evict *[]*trackedConn) bool {
	front := idle.Front()
	if front == nil {
		return false
	}
	victim := front.Value.(*trackedConn)
	victim.releaseLocked()
	*evict = append(*evict, victim)
	return true
}

// releaseLocked uncounts c (once: eviction and Close both call it).
func (c *trackedConn) releaseLocked() {
	if c.released {
		return
	}
	c.released = true
	l := c.l
	a := l.byAddr[c.addr]
	c.unidleLocked()
	l.total--
	a.total--
	if c.trusted {
		l.metrics.trusted.Dec()
	} else {
		a.untrusted--
		l.metrics.untrusted.Dec()
	}
	if a.total == 0 {
		delete(l.byAddr, c.addr)
	}
}

func (c *trackedConn) unidleLocked() {
	if c.idleElem != nil {
		c.l.idle.Remove(c.idleElem)
		c.l.byAddr[c.addr].idle.Remove(c.addrElem)
		c.idleElem, c.addrElem = nil, nil
	}
}

func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	c.releaseLocked()
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// CloseWrite lets net/http half-close a connection it is done with, as
// it does with a bare TCP connection, before closing it.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// begin marks a request in a handler: a busy connection is not evicted.
func (c *trackedConn) begin() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.active++
	c.unidleLocked()
}

// end marks a request done; an untrusted connection with none left in a
// handler is evictable again (as the newest).
func (c *trackedConn) end() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.active--
	if c.active == 0 && !c.trusted && !c.released && c.idleElem == nil {
		c.idleElem = c.l.idle.PushBack(c)
		c.addrElem = c.l.byAddr[c.addr].idle.PushBack(c)
	}
}

// trust marks the connection authenticated: it leaves the untrusted count
// of its address and is never evicted to make room.
func (c *trackedConn) trust() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.trusted || c.released {
		return
	}
	c.trusted = true
	c.unidleLocked()
	c.l.byAddr[c.addr].untrusted--
	c.l.metrics.untrusted.Dec()
	c.l.metrics.trusted.Inc()
}

// trackedConnKey keys a request's connection in its context.
type trackedConnKey struct{}

// connContext is the http.Server's ConnContext: it hands the tracked
// connection (under TLS, the one the tls.Conn wraps) to every request.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	if tc, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, trackedConnKey{}, tc)
	}
	return ctx
}

func connOf(ctx context.Context) *trackedConn {
	tc, _ := ctx.Value(trackedConnKey{}).(*trackedConn)
	return tc
}

// connMetrics shows the caps at work.
type connMetrics struct {
	trusted, untrusted, max prometheus.Gauge
	closed                  *prometheus.CounterVec
	refused                 *prometheus.CounterVec
}

func newConnMetrics(reg prometheus.Registerer) *connMetrics {
	open := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fak_api_connections", Help: "Open API connections, by state (trusted: one of its requests authenticated; untrusted: none yet).",
	}, []string{"state"})
	m := &connMetrics{
		trusted: open.WithLabelValues("trusted"), untrusted: open.WithLabelValues("untrusted"),
		max: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fak_api_connections_max", Help: "The most API connections this node keeps open (Limits.MaxConns).",
		}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fak_api_connections_closed_total",
			Help: "API connections closed by the connection caps: refused (no room at accept) or evicted (an idle untrusted one, to make room).",
		}, []string{"reason"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fak_api_requests_refused_total",
			Help: "Requests refused before their body was read, by reason (UNAUTHENTICATED, PERMISSION_DENIED, REQUEST_TOO_LARGE).",
		}, []string{"reason"}),
	}
	reg.MustRegister(open, m.max, m.closed, m.refused)
	return m
}
