package netproxy

import (
	"net"
	"runtime"
	"testing"
	"time"
)

// TestCloseReleasesEverything closes a Network with traffic in every state
// and checks that its listeners are gone and no goroutine is left.
func TestCloseReleasesEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	var tcpProxy, udpProxy string
	t.Run("traffic", func(t *testing.T) {
		f := newFleet(t)
		tcpProxy = f.proxy["n2"]
		us := startUDPServer(t, nodeIPs["n2"])
		var err error
		udpProxy, err = f.n.ProxyUDP("n2", "127.0.0.12:0", us.conn.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}

		open, _ := f.connect(t, "n1", "n2")
		stalled, stalledSrv := f.connect(t, "n3", "n2")
		f.n.Block("n2", "n3")
		write(t, stalledSrv, []byte("stuck"))
		slow, _ := f.connect(t, "n3", "n1")
		f.n.SetLatency("n3", "n1", time.Hour)
		write(t, slow, []byte("later"))
		f.n.Block("n1", "n3")
		held := f.dial(t, nodeIPs["n1"], "n3")
		write(t, held, []byte("held"))
		uc := newUDPClient(t, nodeIPs["n1"], udpProxy)
		uc.roundTrip(t, "nat entry")
		f.n.SetLatency("n1", "n2", time.Hour)
		uc.send(t, "queued for an hour")
		eventually(t, "held conn tracked", func() bool { return f.n.tracked() == 3+1+3*2+1+1 })

		closed := make(chan error)
		go func() { closed <- f.n.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(patience):
			t.Fatal("Close hangs")
		}
		for _, c := range []net.Conn{open, stalled, slow, held} {
			ended(t, c)
		}
		if got := f.n.tracked(); got != 0 {
			t.Fatalf("%d closers left", got)
		}
		if _, err := f.n.ProxyTCP("n1", "127.0.0.11:0", "127.0.0.11:1"); err == nil {
			t.Fatal("ProxyTCP after Close succeeded")
		}
		if _, err := f.n.ProxyUDP("n1", "127.0.0.11:0", "127.0.0.11:1"); err == nil {
			t.Fatal("ProxyUDP after Close succeeded")
		}
		f.n.Heal() // fault calls still work
		if err := f.n.Close(); err != nil {
			t.Fatal(err)
		}
	})
	// The proxies' addresses are free again.
	ln, err := net.Listen("tcp", tcpProxy)
	if err != nil {
		t.Fatalf("TCP proxy address still bound: %v", err)
	}
	ln.Close()
	uc, err := net.ListenPacket("udp", udpProxy)
	if err != nil {
		t.Fatalf("UDP proxy address still bound: %v", err)
	}
	uc.Close()
	const slack = 2
	deadline := time.Now().Add(patience)
	for runtime.NumGoroutine() > before+slack {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(),
				buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
