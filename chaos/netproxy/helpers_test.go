package netproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

const (
	// patience bounds every wait for something that should happen.
	patience = 10 * time.Second
	// quiet is how long something that must not happen is watched for.
	quiet = 150 * time.Millisecond
)

var nodeIPs = map[string]net.IP{
	"n1": net.ParseIP("127.0.0.11"),
	"n2": net.ParseIP("127.0.0.12"),
	"n3": net.ParseIP("127.0.0.13"),
}

// clientIP is not a node: its traffic is never faulted.
var clientIP = net.ParseIP("127.0.0.1")

func testLogger(t *testing.T) hclog.Logger {
	if os.Getenv("NETPROXY_LOG") == "" {
		return nil
	}
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Output: t.Output(), Level: hclog.Trace})
}

// tcpServer is a node's real TCP listener; tests get the accepted conns.
type tcpServer struct {
	ln    net.Listener
	conns chan net.Conn
	done  chan struct{}
}

func startTCPServer(t *testing.T, ip net.IP) *tcpServer {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	s := &tcpServer{ln: ln, conns: make(chan net.Conn, 16), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case s.conns <- c:
			default:
				c.Close()
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-s.done
		for {
			select {
			case c := <-s.conns:
				c.Close()
			default:
				return
			}
		}
	})
	return s
}

// accept returns the next conn the server accepted, failing after patience.
func (s *tcpServer) accept(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-s.conns:
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(patience):
		t.Fatal("server accepted no connection")
		return nil
	}
}

// noAccept fails if the server accepts a conn within quiet.
func (s *tcpServer) noAccept(t *testing.T) {
	t.Helper()
	select {
	case c := <-s.conns:
		c.Close()
		t.Fatalf("server accepted a connection from %v", c.RemoteAddr())
	case <-time.After(quiet):
	}
}

// fleet is three nodes, each with a real TCP listener on its IP and a TCP
// proxy in front of it.
type fleet struct {
	n     *Network
	srv   map[string]*tcpServer
	proxy map[string]string // node -> proxy address
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	f := &fleet{n: New(testLogger(t)), srv: map[string]*tcpServer{}, proxy: map[string]string{}}
	t.Cleanup(func() { f.n.Close() })
	for name, ip := range nodeIPs {
		f.n.AddNode(name, ip)
		f.srv[name] = startTCPServer(t, ip)
		addr, err := f.n.ProxyTCP(name, net.JoinHostPort(ip.String(), "0"), f.srv[name].ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		f.proxy[name] = addr
	}
	return f
}

// dial connects from ip to the proxy of node to.
func (f *fleet) dial(t *testing.T, ip net.IP, to string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: patience}
	c, err := d.Dial("tcp", f.proxy[to])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// connect opens a proxied conn from node from to node to and returns both
// ends.
func (f *fleet) connect(t *testing.T, from, to string) (client, server net.Conn) {
	t.Helper()
	client = f.dial(t, nodeIPs[from], to)
	return client, f.srv[to].accept(t)
}

func write(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(patience))
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// expect reads len(want) bytes from c and compares them with want.
func expect(t *testing.T, c net.Conn, want []byte) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(patience))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read %d bytes: %v", len(want), err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %q..., want %q...", trunc(got), trunc(want))
	}
}

// silent fails if c yields a byte, or ends, within quiet.
func silent(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(quiet))
	var b [1]byte
	if n, err := c.Read(b[:]); n > 0 || !isTimeout(err) {
		t.Fatalf("read %d bytes, %v: want a stalled connection", n, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// ended fails unless c reaches end of stream (or a reset) within patience.
func ended(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(patience))
	if _, err := io.Copy(io.Discard, c); isTimeout(err) {
		t.Fatal("connection still open")
	}
}

func trunc(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}

// eventually polls cond until it holds, failing after patience.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tracked is how many listeners, conns and sockets n will close on Close.
func (n *Network) tracked() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.closers)
}

// payload returns size bytes of a pattern with a prime period, so that a
// lost, repeated or reordered chunk shows.
func payload(size int, seed byte) []byte {
	block := make([]byte, 251)
	for i := range block {
		block[i] = byte(i*7) ^ seed
	}
	return bytes.Repeat(block, size/len(block)+1)[:size]
}

func msg(format string, args ...any) []byte { return []byte(fmt.Sprintf(format, args...)) }
