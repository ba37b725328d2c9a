package cluster

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// tcpStreamLayer is the raft.StreamLayer fak owns: plain TCP today, so TLS
// (or a multiplexed port) can wrap it later without touching Raft.
type tcpStreamLayer struct {
	net.Listener
	advertise net.Addr
	source    sourceDialer
}

var _ raft.StreamLayer = (*tcpStreamLayer)(nil)

// newTCPStreamLayer listens on bind and advertises advertise (empty: the
// bound address).
func newTCPStreamLayer(bind, advertise string) (*tcpStreamLayer, error) {
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
	return &tcpStreamLayer{Listener: ln, advertise: addr, source: newSourceDialer(bind)}, nil
}

func (t *tcpStreamLayer) Addr() net.Addr { return t.advertise }

func (t *tcpStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := t.source.dialer(string(address), timeout).Dial("tcp", string(address))
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return conn, nil
}
