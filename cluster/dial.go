package cluster

import (
	"context"
	"net"
	"time"
)

// sourceDialer dials peers from the node's own bind IP, so outgoing Raft,
// gossip and forwarding traffic carries the same source address that peers
// and firewalls know the node by (and the chaos harness can tell nodes
// apart on one host). An unspecified bind IP leaves the choice to the
// kernel; a loopback bind IP is used only for loopback destinations, since
// a packet from 127.0.0.x cannot reach another host.
type sourceDialer struct {
	ip net.IP // nil: kernel chooses
}

func newSourceDialer(bindAddr string) sourceDialer {
	host, _, err := net.SplitHostPort(bindAddr)
	if err != nil {
		return sourceDialer{}
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.IsUnspecified() {
		return sourceDialer{}
	}
	return sourceDialer{ip: ip}
}

func (s sourceDialer) local(dst string) net.Addr {
	if s.ip == nil {
		return nil
	}
	if s.ip.IsLoopback() {
		host, _, err := net.SplitHostPort(dst)
		if err != nil {
			return nil
		}
		if d := net.ParseIP(host); d == nil || !d.IsLoopback() {
			return nil
		}
	}
	return &net.TCPAddr{IP: s.ip}
}

func (s sourceDialer) dialer(dst string, timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout}
	if la := s.local(dst); la != nil {
		d.LocalAddr = la
	}
	return d
}

// DialContext dials a peer's API from this node's Raft bind IP; the API
// layer uses it for forwarding to the leader.
func (c *Cluster) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return newSourceDialer(c.cfg.RaftAddr).dialer(addr, 0).DialContext(ctx, network, addr)
}
