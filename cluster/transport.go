package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// tcpStreamLayer is the raft.StreamLayer fak owns: TCP, wrapped in mutual
// TLS when the node has a TLS identity, so Raft never sees the difference.
type tcpStreamLayer struct {
	net.Listener
	advertise net.Addr
	source    sourceDialer
	// serverTLS and clientTLS are nil for plain TCP.
	serverTLS, clientTLS *tls.Config
}

var _ raft.StreamLayer = (*tcpStreamLayer)(nil)

// newTCPStreamLayer listens on bind and advertises advertise (empty: the
// bound address). With tlsID, every connection is mutual TLS between
// nodes of the same CA.
func newTCPStreamLayer(bind, advertise string, tlsID *NodeTLS) (*tcpStreamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raft listen %s: %w", bind, err)
	}
	var addr net.Addr = ln.Addr()
	if advertise != "" {
		a, err := net.ResolveTCPAddr("tcp", advertise)
		if err != nil || a.IP == nil || a.IP.IsUnspecified() || a.Port == 0 {
			ln.Close()
			return nil, fmt.Errorf("raft advertise address %q: want a specific ip:port", advertise)
		}
		addr = a
	} else if addr.(*net.TCPAddr).IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raft address %s must name a specific IP to advertise (or set an advertise address)", bind)
	}
	l := &tcpStreamLayer{Listener: ln, advertise: addr, source: newSourceDialer(bind)}
	if tlsID != nil {
		l.serverTLS, l.clientTLS = tlsID.PeerServerConfig(), tlsID.PeerClientConfig()
	}
	return l, nil
}

func (t *tcpStreamLayer) Addr() net.Addr { return t.advertise }

// Accept hands Raft the connection before the TLS handshake: Raft serves
// each connection on its own goroutine, where the first read runs the
// handshake, so a slow or hostile peer cannot stall the accept loop.
func (t *tcpStreamLayer) Accept() (net.Conn, error) {
	conn, err := t.Listener.Accept()
	if err != nil || t.serverTLS == nil {
		return conn, err
	}
	return &handshakeConn{Conn: tls.Server(conn, t.serverTLS)}, nil
}

func (t *tcpStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := t.source.dialer(string(address), timeout).Dial("tcp", string(address))
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if t.clientTLS == nil {
		return conn, nil
	}
	tc := tls.Client(conn, t.clientTLS)
	ctx, cancel := context.WithTimeout(context.Background(), orDur(timeout, raftTimeout))
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("raft tls handshake with %s: %w", address, err)
	}
	return tc, nil
}

// handshakeConn runs the server-side TLS handshake on first use, bounded
// by raftTimeout (an accepted Raft connection otherwise has no deadline).
type handshakeConn struct {
	*tls.Conn
	once sync.Once
	err  error
}

func (c *handshakeConn) handshake() error {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), raftTimeout)
		defer cancel()
		c.err = c.Conn.HandshakeContext(ctx)
	})
	return c.err
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *handshakeConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
