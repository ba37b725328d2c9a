package netproxy

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// maxDatagram is the largest UDP payload relayed.
const maxDatagram = 64 << 10

type udpProxy struct {
	n      *Network
	node   string // destination node
	target *net.UDPAddr
	ln     *net.UDPConn
	delay  *delayQueue
	log    hclog.Logger

	mu  sync.Mutex
	nat map[string]*natEntry // by source address
}

// natEntry is the forwarding socket of one source address.
type natEntry struct {
	src  *net.UDPAddr
	node string // source node, "" if none
	fwd  *net.UDPConn
	last time.Time // last packet either way; guarded by udpProxy.mu
}

// ProxyUDP listens on listen (host:port, port 0 picks one) and relays
// datagrams to target, the real socket of node, the destination node, and
// replies back, as a NAT: each source address gets its own forwarding socket,
// bound to the source node's IP when the source is a node, whose replies are
// sent back to that source from the listen socket. Entries idle for two
// minutes are dropped. It returns the address listened on.
func (n *Network) ProxyUDP(node, listen, target string) (addr string, err error) {
	taddr, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return "", err
	}
	laddr, err := net.ResolveUDPAddr("udp", listen)
	if err != nil {
		return "", err
	}
	ln, err := net.ListenUDP("udp", laddr)
	if err != nil {
		return "", err
	}
	if !n.track(ln) {
		return "", net.ErrClosed
	}
	p := &udpProxy{
		n: n, node: node, target: taddr, ln: ln, delay: newDelayQueue(),
		nat: map[string]*natEntry{},
	}
	p.log = n.log.Named("udp").With("node", node, "proxy", ln.LocalAddr().String())
	if !n.goroutine(p.serve) || !n.goroutine(func() { p.delay.run(n.ctx) }) {
		n.untrack(ln)
		ln.Close()
		return "", net.ErrClosed
	}
	p.log.Debug("proxy started", "target", target)
	return ln.LocalAddr().String(), nil
}

// serve relays datagrams from sources to the target.
func (p *udpProxy) serve() {
	buf := make([]byte, maxDatagram)
	for {
		nr, src, err := p.ln.ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			p.log.Debug("read failed", "error", err)
			continue
		}
		e := p.entry(src)
		if e == nil {
			continue
		}
		p.relay(link{e.node, p.node}, bytes.Clone(buf[:nr]), func(b []byte) {
			e.fwd.WriteToUDP(b, p.target)
		})
	}
}

// entry returns the NAT entry of src, creating it (and its reply goroutine)
// if needed, and marks it used. It returns nil if that fails.
func (p *udpProxy) entry(src *net.UDPAddr) *natEntry {
	key := src.String()
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.nat[key]; e != nil {
		e.last = time.Now()
		return e
	}
	node, ip := p.n.nodeByAddr(src)
	fwd, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip}) // nil IP: unspecified
	if err != nil {
		p.log.Warn("NAT socket failed", "src", key, "error", err)
		return nil
	}
	if !p.n.track(fwd) {
		return nil
	}
	e := &natEntry{src: src, node: node, fwd: fwd, last: time.Now()}
	if !p.n.goroutine(func() { p.reply(e) }) {
		p.n.untrack(fwd)
		fwd.Close()
		return nil
	}
	p.nat[key] = e
	p.log.Debug("NAT entry", "src", key, "src_node", node, "local", fwd.LocalAddr().String())
	return e
}

// reply relays datagrams received on e's forwarding socket back to e's
// source, until the entry is idle for udpIdle or closed.
func (p *udpProxy) reply(e *natEntry) {
	defer func() {
		p.n.untrack(e.fwd)
		e.fwd.Close()
	}()
	l := link{p.node, e.node}
	buf := make([]byte, maxDatagram)
	for {
		p.mu.Lock()
		deadline := e.last.Add(p.n.udpIdle)
		p.mu.Unlock()
		e.fwd.SetReadDeadline(deadline)
		nr, _, err := e.fwd.ReadFromUDP(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !p.expire(e) {
				continue
			}
			p.remove(e)
			return
		}
		p.mu.Lock()
		e.last = time.Now()
		p.mu.Unlock()
		p.relay(l, bytes.Clone(buf[:nr]), func(b []byte) {
			p.ln.WriteToUDP(b, e.src)
		})
	}
}

// expire removes e if it has been idle for udpIdle, and reports whether it
// did. Checking and removing under mu means a packet that found e in the
// table always finds its socket open.
func (p *udpProxy) expire(e *natEntry) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(e.last) < p.n.udpIdle {
		return false
	}
	p.removeLocked(e)
	p.log.Debug("NAT entry expired", "src", e.src.String())
	return true
}

func (p *udpProxy) remove(e *natEntry) {
	p.mu.Lock()
	p.removeLocked(e)
	p.mu.Unlock()
}

func (p *udpProxy) removeLocked(e *natEntry) {
	if key := e.src.String(); p.nat[key] == e {
		delete(p.nat, key)
	}
}

// relay sends pkt with send now, later (latency) or never (blocked).
func (p *udpProxy) relay(l link, pkt []byte, send func([]byte)) {
	blocked, delay, _, ok := p.n.state(l)
	switch {
	case !ok || blocked:
		p.log.Trace("dropped", "from", l.from, "to", l.to, "bytes", len(pkt))
	case delay > 0:
		if !p.delay.push(time.Now().Add(delay), func() { send(pkt) }) {
			p.log.Trace("dropped: delay queue full", "from", l.from, "to", l.to)
		}
	default:
		send(pkt)
	}
}
