package netproxy

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

const (
	// chunkSize is the largest read forwarded as one chunk.
	chunkSize = 32 << 10
	// dialTimeout bounds dialing the target.
	dialTimeout = 10 * time.Second
)

type tcpProxy struct {
	n      *Network
	node   string // destination node
	target string
	ln     net.Listener
	log    hclog.Logger
}

// ProxyTCP listens on listen (host:port, port 0 picks one) and forwards each
// accepted connection to target, the real listener of node, the destination
// node. It returns the address listened on, the one node should advertise.
// The source node of a connection is the one whose IP is its remote IP.
func (n *Network) ProxyTCP(node, listen, target string) (addr string, err error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return "", err
	}
	if !n.track(ln) {
		return "", net.ErrClosed
	}
	p := &tcpProxy{n: n, node: node, target: target, ln: ln}
	p.log = n.log.Named("tcp").With("node", node, "proxy", ln.Addr().String())
	if !n.goroutine(p.accept) {
		n.untrack(ln)
		ln.Close()
		return "", net.ErrClosed
	}
	p.log.Debug("proxy started", "target", target)
	return ln.Addr().String(), nil
}

func (p *tcpProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			p.log.Warn("accept failed", "error", err)
			select {
			case <-time.After(10 * time.Millisecond):
			case <-p.n.ctx.Done():
				return
			}
			continue
		}
		if !p.n.goroutine(func() { p.handle(c) }) {
			c.Close()
		}
	}
}

// handle proxies one accepted connection until either side ends it or the
// Network closes; every goroutine it starts has exited when it returns.
func (p *tcpProxy) handle(client net.Conn) {
	src, srcIP := p.n.nodeByAddr(client.RemoteAddr())
	up, down := link{src, p.node}, link{p.node, src}
	log := p.log.With("client", client.RemoteAddr().String(), "src", src)
	if !p.n.track(client) {
		return
	}
	defer p.n.untrack(client)

	done := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(done) }) }
	var wg sync.WaitGroup
	upq := newChunkQueue()
	readDone := make(chan struct{})
	wg.Go(func() {
		defer close(readDone)
		readChunks(client, upq, done)
	})

	target := p.connect(up, srcIP, readDone, log)
	if target != nil {
		log.Debug("connection open", "local", target.LocalAddr().String())
		downq := newChunkQueue()
		wg.Go(func() { readChunks(target, downq, done) })
		wg.Go(func() { p.n.writeChunks(up, upq, target, done, stop) })
		wg.Go(func() { p.n.writeChunks(down, downq, client, done, stop) })
		select {
		case <-done:
		case <-p.n.ctx.Done():
		}
	}
	stop()
	client.Close()
	if target != nil {
		target.Close()
		p.n.untrack(target)
	}
	wg.Wait()
	log.Debug("connection closed")
}

// connect dials the target once the up link is open, from the source node's
// IP when it has one. It returns nil if the client went away (readDone)
// first, the Network closed, or the dial failed.
func (p *tcpProxy) connect(up link, srcIP net.IP, readDone <-chan struct{}, log hclog.Logger) net.Conn {
	if blocked, _, _, _ := p.n.state(up); blocked {
		log.Debug("connection held: link blocked")
	}
	if !p.n.waitOpen(up, readDone) {
		return nil
	}
	d := net.Dialer{Timeout: dialTimeout}
	if srcIP != nil {
		d.LocalAddr = &net.TCPAddr{IP: srcIP}
	}
	target, err := d.DialContext(p.n.ctx, "tcp", p.target)
	if err != nil {
		log.Debug("dial target failed", "target", p.target, "error", err)
		return nil
	}
	if !p.n.track(target) {
		return nil
	}
	return target
}

// readChunks reads c into q, stamping each chunk, and ends with a chunk
// carrying the read error (io.EOF at end of stream).
func readChunks(c net.Conn, q *chunkQueue, done <-chan struct{}) {
	buf := make([]byte, chunkSize)
	for {
		nr, err := c.Read(buf)
		if nr > 0 && !q.put(chunk{data: bytes.Clone(buf[:nr]), stamp: time.Now()}, done) {
			return
		}
		if err != nil {
			q.put(chunk{err: err, stamp: time.Now()}, done)
			return
		}
	}
}

// writeChunks writes the chunks of q to c in order, each once l is open and
// its latency has passed since it was read. At the end of the stream, a
// write error or done, it calls stop.
func (n *Network) writeChunks(l link, q *chunkQueue, c net.Conn, done <-chan struct{}, stop func()) {
	defer stop()
	for {
		ch, ok := q.get(done)
		if !ok || !n.waitDue(l, ch.stamp, done) || ch.err != nil {
			return
		}
		if _, err := c.Write(ch.data); err != nil {
			return
		}
		q.release(len(ch.data))
	}
}
