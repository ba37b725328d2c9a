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
}

var _ raft.StreamLayer = (*tcpStreamLayer)(nil)

func newTCPStreamLayer(bind string) (*tcpStreamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raft listen %s: %w", bind, err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	if addr.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raft address %s must name a specific IP to advertise", bind)
	}
	return &tcpStreamLayer{Listener: ln, advertise: addr}, nil
}

func (t *tcpStreamLayer) Addr() net.Addr { return t.advertise }

func (t *tcpStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.Dial("tcp", string(address))
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return conn, nil
}
