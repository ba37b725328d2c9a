package netproxy

import (
	"net"
	"strings"
	"testing"
	"time"
)

// udpServer is a node's real UDP socket: it reports each datagram and
// replies "<source addr>|<payload>".
type udpServer struct {
	conn *net.UDPConn
	got  chan udpPacket
}

type udpPacket struct {
	from *net.UDPAddr
	data string
	at   time.Time
}

func startUDPServer(t *testing.T, ip net.IP) *udpServer {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip})
	if err != nil {
		t.Fatal(err)
	}
	s := &udpServer{conn: c, got: make(chan udpPacket, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, maxDatagram)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			select {
			case s.got <- udpPacket{from, string(buf[:n]), time.Now()}:
			default:
			}
			c.WriteToUDP([]byte(from.String()+"|"+string(buf[:n])), from)
		}
	}()
	t.Cleanup(func() {
		c.Close()
		<-done
	})
	return s
}

// next returns the next datagram the server received.
func (s *udpServer) next(t *testing.T) udpPacket {
	t.Helper()
	select {
	case p := <-s.got:
		return p
	case <-time.After(patience):
		t.Fatal("server received nothing")
		return udpPacket{}
	}
}

func (s *udpServer) nothing(t *testing.T) {
	t.Helper()
	select {
	case p := <-s.got:
		t.Fatalf("server received %q from %v", p.data, p.from)
	case <-time.After(quiet):
	}
}

type udpClient struct {
	conn  *net.UDPConn
	proxy *net.UDPAddr
}

func newUDPClient(t *testing.T, ip net.IP, proxy string) *udpClient {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	addr, err := net.ResolveUDPAddr("udp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	return &udpClient{c, addr}
}

func (c *udpClient) send(t *testing.T, m string) {
	t.Helper()
	if _, err := c.conn.WriteToUDP([]byte(m), c.proxy); err != nil {
		t.Fatal(err)
	}
}

// reply returns the next reply, checking it comes from the proxy, as
// (address the server saw, payload).
func (c *udpClient) reply(t *testing.T) (seen, data string) {
	t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(patience))
	buf := make([]byte, maxDatagram)
	n, from, err := c.conn.ReadFromUDP(buf)
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	if from.String() != c.proxy.String() {
		t.Fatalf("reply from %v, want the proxy %v", from, c.proxy)
	}
	seen, data, _ = strings.Cut(string(buf[:n]), "|")
	return seen, data
}

func (c *udpClient) noReply(t *testing.T) {
	t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(quiet))
	buf := make([]byte, maxDatagram)
	if n, _, err := c.conn.ReadFromUDP(buf); !isTimeout(err) {
		t.Fatalf("got reply %q, %v", buf[:n], err)
	}
}

// roundTrip sends m and checks the reply, returning the address the server
// saw.
func (c *udpClient) roundTrip(t *testing.T, m string) string {
	t.Helper()
	c.send(t, m)
	seen, data := c.reply(t)
	if data != m {
		t.Fatalf("reply %q, want %q", data, m)
	}
	return seen
}

// udpNet is a Network with the three nodes and a UDP proxy in front of a
// server on n2.
func udpNet(t *testing.T) (*Network, *udpServer, string) {
	t.Helper()
	n := New(testLogger(t))
	t.Cleanup(func() { n.Close() })
	for name, ip := range nodeIPs {
		n.AddNode(name, ip)
	}
	s := startUDPServer(t, nodeIPs["n2"])
	addr, err := n.ProxyUDP("n2", "127.0.0.12:0", s.conn.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	return n, s, addr
}

func TestUDPPassthroughNAT(t *testing.T) {
	_, s, proxy := udpNet(t)
	for _, from := range []string{"n1", "n3"} {
		c := newUDPClient(t, nodeIPs[from], proxy)
		seen := c.roundTrip(t, "hello from "+from)
		<-s.got
		ip, _, _ := net.SplitHostPort(seen)
		if ip != nodeIPs[from].String() {
			t.Fatalf("server saw %s, want %v", seen, nodeIPs[from])
		}
		// The same source keeps its NAT entry, hence its address.
		if again := c.roundTrip(t, "again"); again != seen {
			t.Fatalf("second datagram seen from %s, first from %s", again, seen)
		}
		<-s.got
	}
	// Two sockets on one node get distinct entries.
	a, b := newUDPClient(t, nodeIPs["n1"], proxy), newUDPClient(t, nodeIPs["n1"], proxy)
	if sa, sb := a.roundTrip(t, "a"), b.roundTrip(t, "b"); sa == sb {
		t.Fatalf("two sources share NAT address %s", sa)
	}
	// A non-node source works too and is not seen as a node.
	seen := newUDPClient(t, clientIP, proxy).roundTrip(t, "anon")
	for _, ip := range nodeIPs {
		if strings.HasPrefix(seen, ip.String()+":") {
			t.Fatalf("non-node source seen as %s", seen)
		}
	}
	// Large datagrams pass unchanged.
	big := strings.Repeat("x", 60000)
	if seenBig := a.roundTrip(t, big); seenBig == "" {
		t.Fatal("no big reply")
	}
}

func TestUDPBlockDrops(t *testing.T) {
	n, s, proxy := udpNet(t)
	c := newUDPClient(t, nodeIPs["n1"], proxy)
	c.roundTrip(t, "warm")
	s.next(t)

	n.Block("n1", "n2")
	c.send(t, "dropped on the way")
	s.nothing(t)
	c.noReply(t)

	n.Heal()
	n.Block("n2", "n1") // the reply path only
	c.send(t, "reply dropped")
	if p := s.next(t); p.data != "reply dropped" {
		t.Fatalf("server got %q", p.data)
	}
	c.noReply(t)

	n.Heal()
	c.roundTrip(t, "healed") // nothing stale arrives first
	s.next(t)

	n.Isolate("n2")
	c.send(t, "isolated")
	s.nothing(t)
	c.noReply(t)
	// Non-node sources are never faulted.
	newUDPClient(t, clientIP, proxy).roundTrip(t, "anon")
	s.next(t)
}

func TestUDPLatency(t *testing.T) {
	n, s, proxy := udpNet(t)
	c := newUDPClient(t, nodeIPs["n1"], proxy)
	const up, down = 100 * time.Millisecond, 50 * time.Millisecond
	n.SetLatency("n1", "n2", up)
	n.SetLatency("n2", "n1", down)
	start := time.Now()
	c.send(t, "slow")
	if p := s.next(t); p.at.Sub(start) < up {
		t.Fatalf("delivered after %v, want >= %v", p.at.Sub(start), up)
	}
	if _, data := c.reply(t); data != "slow" {
		t.Fatalf("reply %q", data)
	}
	if el := time.Since(start); el < up+down {
		t.Fatalf("round trip %v, want >= %v", el, up+down)
	}
	// A burst is delivered whole.
	n.SetLatency("n2", "n1", 0)
	for i := range 20 {
		c.send(t, string(msg("burst-%02d", i)))
	}
	got := map[string]bool{}
	for range 20 {
		_, data := c.reply(t)
		got[data] = true
	}
	if len(got) != 20 {
		t.Fatalf("got %d distinct replies, want 20", len(got))
	}
}

func TestUDPNATExpiry(t *testing.T) {
	n := New(testLogger(t))
	t.Cleanup(func() { n.Close() })
	n.udpIdle = 300 * time.Millisecond
	n.AddNode("n1", nodeIPs["n1"])
	n.AddNode("n2", nodeIPs["n2"])
	s := startUDPServer(t, nodeIPs["n2"])
	proxy, err := n.ProxyUDP("n2", "127.0.0.12:0", s.conn.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := newUDPClient(t, nodeIPs["n1"], proxy)
	base := n.tracked()
	c.roundTrip(t, "one")
	if got := n.tracked(); got != base+1 {
		t.Fatalf("tracked %d, want %d", got, base+1)
	}
	eventually(t, "NAT entry expired", func() bool { return n.tracked() == base })
	c.roundTrip(t, "two") // a new entry
	if got := n.tracked(); got != base+1 {
		t.Fatalf("tracked %d, want %d", got, base+1)
	}
}
