package node_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api"
	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// Issue 32: a client with no token cannot take a node down. These run the
// issue's two attacks against one node of a three-node fleet while a
// normal client appends through that node.

// vmRSS is this process's resident set (the whole fleet: its three nodes
// share the test process, so it bounds the attacked node's).
func vmRSS(t testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Skip("no VmRSS")
	return 0
}

// heapBytes is the heap's objects in use, read without stopping the world.
func heapBytes() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

func openFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}

// normalClient appends through n until stop closes and returns each
// append's latency; an error fails the test.
func normalClient(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id string, stop <-chan struct{}) func() []time.Duration {
	var lat []time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			if _, err := appendText(ctxT(t, 10*time.Second), c, n, id, fmt.Sprintf("normal-%d", i)); err != nil {
				t.Errorf("the normal client's append %d: %v", i, err)
				return
			}
			lat = append(lat, time.Since(start))
		}
	}()
	return func() []time.Duration { <-done; return lat }
}

// quietP99 is the normal client's p99 over 3 s with no attack.
func quietP99(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id string) time.Duration {
	stop := make(chan struct{})
	quiet := normalClient(t, c, n, id, stop)
	time.Sleep(3 * time.Second)
	close(stop)
	return p99(quiet())
}

// latencyBound is the p99 the normal client must keep under attack: the
// issue's 100 ms, or, on a machine so loaded (two cores shared by the
// fleet, the attacker, the race detector and other packages' tests) that
// the client's p99 with no attack — measured before and after it — is
// already above a quarter of that, four times that quiet p99: the attack
// must not be what slows the client (unfixed, its appends waited up to
// 8 s).
func latencyBound(t *testing.T, before, after time.Duration) time.Duration {
	bound := max(100*time.Millisecond, 4*max(before, after))
	t.Logf("normal client without attack: p99 %v before, %v after; bound under attack %v", before, after, bound)
	return bound
}

func p99(lat []time.Duration) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[(len(s)*99)/100]
}

// warmUp appends a few times so the client's connections are open and
// the fleet's first-call costs are paid before anything is timed.
func warmUp(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id string) {
	for i := 0; i < 20; i++ {
		if _, err := appendText(ctxT(t, 10*time.Second), c, n, id, "warm"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGzipBombsWithoutTokenCostANodeNothing: 128 parallel callers with no
// token send, for 5 s, gzip bodies of 15.6 KB that inflate to 16 MB of JSON
// (the issue measured 70 MB → 2.59 GB RSS). Refused from their headers,
// they leave the process under 256 MB and the normal client's p99 under
// 100 ms.
func TestGzipBombsWithoutTokenCostANodeNothing(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	n := c.Nodes[0]
	id := createSession(t, c, n, "bombs")
	warmUp(t, c, n, id)
	before := quietP99(t, c, n, id)

	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write([]byte(`{"events":[`))
	spaces := bytes.Repeat([]byte(" "), 1<<20)
	for left := 16_000_000; left > 0; left -= len(spaces) {
		_, _ = zw.Write(spaces[:min(left, len(spaces))])
	}
	_, _ = zw.Write([]byte(`]}`))
	_ = zw.Close()
	bomb := buf.Bytes()

	runtime.GC()
	baseRSS, baseHeap := vmRSS(t), heapBytes()
	var peakRSS, peakHeap atomic.Int64
	peakRSS.Store(baseRSS)
	peakHeap.Store(baseHeap)
	stop := make(chan struct{})
	latencies := normalClient(t, c, n, id, stop)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if r := vmRSS(t); r > peakRSS.Load() {
				peakRSS.Store(r)
			}
			if h := heapBytes(); h > peakHeap.Load() {
				peakHeap.Store(h)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	// 128 attackers in parallel, each sending a bomb a second for 5 s from
	// eight addresses of their own. Unfixed, each bomb was in flight as long
	// as the node took to inflate it; refused at once, a flood without
	// pauses would measure how fast this process's two cores — shared by
	// attacker, fleet and race detector — open connections, not the node.
	const attackers, pause, attackFor = 128, time.Second, 5 * time.Second
	// Raw connections, as an attacker's tool would use: the fleet and the
	// attacker share this process, and an HTTP client's own work would be
	// counted against the node.
	request := append([]byte(fmt.Sprintf("POST /fak.v1.SessionService/AppendEvents HTTP/1.1\r\nHost: %s\r\n"+
		"Content-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n", n.APIAddr, len(bomb))), bomb...)
	var wg sync.WaitGroup
	var sent, refused, other atomic.Int64
	var otherAnswer atomic.Value
	for i := range attackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Staggered, so the bombs do not all land in the same instant.
			time.Sleep(time.Duration(i) * pause / attackers)
			for end := time.Now().Add(attackFor); time.Now().Before(end); time.Sleep(pause) {
				sent.Add(1)
				conn, err := dialFrom(fmt.Sprintf("127.0.0.%d", 2+i%8), n.APIAddr)
				if err != nil {
					other.Add(1)
					otherAnswer.Store(err.Error())
					continue
				}
				_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
				// The node may answer and close before the body is all
				// sent: a write error is no failure, the answer decides.
				_, _ = conn.Write(request)
				answer, _ := io.ReadAll(conn)
				conn.Close()
				switch {
				case bytes.HasPrefix(answer, []byte("HTTP/1.1 401")) && bytes.Contains(answer, []byte("unauthenticated")):
					refused.Add(1)
				case len(answer) == 0:
					// Closed with the body unread, the node's kernel
					// resets the connection, which can drop the answer;
					// or the connection cap closed it before its headers.
					refused.Add(1)
				default:
					other.Add(1)
					otherAnswer.Store(fmt.Sprintf("%.300q", answer))
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	lat := latencies()
	<-sampled
	bound := latencyBound(t, before, quietP99(t, c, n, id))
	t.Logf("%d gzip bombs of %d bytes (16 MB inflated) without a token: RSS %d MB before, peak %d MB; heap %d MB before, peak %d MB; normal client: %d appends, p99 %v; fds %d",
		sent.Load(), len(bomb), baseRSS>>20, peakRSS.Load()>>20, baseHeap>>20, peakHeap.Load()>>20, len(lat), p99(lat), openFDs())
	if other.Load() > 0 {
		t.Fatalf("%d bombs were not refused UNAUTHENTICATED, e.g. %v", other.Load(), otherAnswer.Load())
	}
	if peakHeap.Load() >= 256<<20 {
		t.Fatalf("the heap grew to %d MB under the bombs, want under 256 MB", peakHeap.Load()>>20)
	}
	if !raceEnabled && peakRSS.Load() >= 256<<20 {
		t.Fatalf("the process grew to %d MB under the bombs, want under 256 MB", peakRSS.Load()>>20)
	}
	if len(lat) < 10 {
		t.Fatalf("the normal client made only %d appends", len(lat))
	}
	if p := p99(lat); p >= bound {
		t.Fatalf("the normal client's p99 was %v under the bombs, want under %v", p, bound)
	}
}

// attackerConn is one of the slow connections.
type attackerConn struct {
	conn   net.Conn
	closed chan struct{} // closed when the node closed it
	at     time.Time     // when the node closed it
}

// dialFrom opens a connection to addr from the loopback address ip, so
// the attacker has addresses of its own, as it would (127.0.0.0/8 is all
// loopback on Linux).
func dialFrom(ip, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return d.Dial("tcp", addr)
}

// TestSlowConnectionsCannotExhaustDescriptors: 1,100 connections that send
// nothing or a body a byte a second (the issue: 1,100 of them took a
// node's 1,024 descriptors for 70 s). The node, capped at 400 API
// connections as if it had 1,024 descriptors with some in use, closes the
// unauthenticated ones at once or to make room, cuts the authenticated
// ones at the body deadline, and keeps its API and health answering.
func TestSlowConnectionsCannotExhaustDescriptors(t *testing.T) {
	const maxConns = 400
	const bodyTimeout = 2 * time.Second
	c := testcluster.New(t, testcluster.Options{Configure: func(name string, cfg *node.Config) {
		if name == "n1" {
			cfg.APILimits = api.Limits{MaxConns: maxConns, BodyTimeout: bodyTimeout}
		}
	}})
	n := c.Node("n1")
	id := createSession(t, c, n, "slow")
	warmUp(t, c, n, id)
	before := quietP99(t, c, n, id)

	// The node's open API connections, as its metrics count them.
	connections := func() int {
		req, _ := http.NewRequest(http.MethodGet, c.BaseURL(n)+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+testcluster.Token)
		resp, err := c.HTTPClient().Do(req)
		if err != nil {
			t.Errorf("metrics unreachable during the attack: %v", err)
			return 0
		}
		defer resp.Body.Close()
		total := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "fak_api_connections{"); ok {
				k, _ := strconv.ParseFloat(v[strings.LastIndexByte(v, ' ')+1:], 64)
				total += int(k)
			}
		}
		return total
	}

	stop := make(chan struct{})
	latencies := normalClient(t, c, n, id, stop)

	// 50 with a token send a body a byte a second; 525 with none do the
	// same; 525 send nothing. From eleven addresses of their own.
	const total = 1100
	conns := make([]*attackerConn, total)
	kinds := make([]string, total)
	start := time.Now()
	var dialed sync.WaitGroup
	for i := range total {
		kind := "silent"
		switch {
		case i < 50:
			kind = "slow body with a token"
		case i%2 == 0:
			kind = "slow body without a token"
		}
		kinds[i] = kind
		ac := &attackerConn{closed: make(chan struct{})}
		conns[i] = ac
		dialed.Add(1)
		go func() {
			ip := fmt.Sprintf("127.0.0.%d", 2+i%11)
			if kind == "slow body with a token" {
				ip = "127.0.0.20"
			}
			conn, err := dialFrom(ip, n.APIAddr)
			dialed.Done()
			if err != nil {
				ac.at = time.Now()
				close(ac.closed)
				return
			}
			ac.conn = conn
			t.Cleanup(func() { conn.Close() })
			if kind != "silent" {
				auth := ""
				if kind == "slow body with a token" {
					auth = "Authorization: Bearer " + testcluster.Token + "\r\n"
				}
				fmt.Fprintf(conn, "POST /fak.v1.SessionService/AppendEvents HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n", auth)
				go func() {
					for {
						select {
						case <-ac.closed:
							return
						case <-time.After(time.Second):
						}
						if _, err := conn.Write([]byte(" ")); err != nil {
							return
						}
					}
				}()
			}
			// Whatever the node answers, wait for it to close.
			_, _ = io.Copy(io.Discard, conn)
			ac.at = time.Now()
			close(ac.closed)
		}()
	}
	dialed.Wait()

	// While the slow connections hang on: the node's connections stay
	// under its cap, and health answers a new connection every time.
	var peakConns, peakFDs int
	var healthFailures []string
	var healthNot200 int
	for time.Since(start) < 6*time.Second {
		peakConns = max(peakConns, connections())
		peakFDs = max(peakFDs, openFDs())
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Second}
		// Reachable is the point: a 503 (no leader known for a moment,
		// the machine's two cores starved under the race detector) is
		// an answer.
		resp, err := hc.Get(c.BaseURL(n) + "/v1/health")
		if err != nil {
			healthFailures = append(healthFailures, err.Error())
		} else {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				healthNot200++
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	lat := latencies()

	// By now every slow body is closed (the unauthenticated at once, the
	// others at the 2 s body deadline); of the silent ones, what the cap
	// does not hold was closed long before their 10 s header timeout.
	var open, slowOpen int
	var slowestClose time.Duration
	for i, ac := range conns {
		select {
		case <-ac.closed:
			if kinds[i] != "silent" {
				slowestClose = max(slowestClose, ac.at.Sub(start))
			}
		default:
			open++
			if kinds[i] != "silent" {
				slowOpen++
			}
		}
	}
	bound := latencyBound(t, before, quietP99(t, c, n, id))
	var rl struct{ cur uint64 }
	if b, err := os.ReadFile("/proc/self/limits"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "Max open files") {
				rl.cur, _ = strconv.ParseUint(strings.Fields(line)[3], 10, 64)
			}
		}
	}
	t.Logf("%d slow connections: node's API connections peaked at %d (cap %d); after 6 s %d still open (%d slow bodies), slow bodies closed by %v; process fds peaked at %d (limit %d); health unreachable %d times, not 200 %d times; normal client: %d appends, p99 %v",
		total, peakConns, maxConns, open, slowOpen, slowestClose, peakFDs, rl.cur, len(healthFailures), healthNot200, len(lat), p99(lat))
	if peakConns > maxConns {
		t.Errorf("the node held %d API connections, over its cap of %d", peakConns, maxConns)
	}
	if slowOpen > 0 {
		t.Errorf("%d slow-body connections still open after 6 s (body deadline %v)", slowOpen, bodyTimeout)
	}
	if open > maxConns {
		t.Errorf("%d attacking connections still open after 6 s, more than the node's cap of %d", open, maxConns)
	}
	if rl.cur > 0 && uint64(peakFDs) >= rl.cur {
		t.Errorf("the process reached %d descriptors, its limit is %d", peakFDs, rl.cur)
	}
	if len(healthFailures) > 0 {
		t.Errorf("health was unreachable %d times during the attack: %v", len(healthFailures), healthFailures)
	}
	if len(lat) < 10 {
		t.Fatalf("the normal client made only %d appends", len(lat))
	}
	if p := p99(lat); p >= bound {
		t.Errorf("the normal client's p99 was %v during the attack, want under %v", p, bound)
	}
}

// TestWatchOutlivesTheBodyDeadline: the body deadline covers a request's
// body only; a watch (a long-lived stream whose request is read at once)
// keeps delivering past it, over HTTP/2 and over HTTP/1.1 (where a read
// deadline left on the connection would cancel the call).
func TestWatchOutlivesTheBodyDeadline(t *testing.T) {
	const bodyTimeout = 300 * time.Millisecond
	c := testcluster.New(t, testcluster.Options{Nodes: 1, Configure: func(_ string, cfg *node.Config) {
		cfg.APILimits = api.Limits{BodyTimeout: bodyTimeout}
	}})
	n := c.Nodes[0]
	id := createSession(t, c, n, "long watch")
	h1 := &http.Transport{}
	h1.Protocols = new(http.Protocols)
	h1.Protocols.SetHTTP1(true)
	for name, hc := range map[string]connect.HTTPClient{
		"HTTP/2":   c.HTTPClient(),
		"HTTP/1.1": &http.Client{Transport: h1},
	} {
		t.Run(name, func(t *testing.T) {
			client := fakv1connect.NewSessionServiceClient(hc, c.BaseURL(n), connect.WithInterceptors(apiclient.Bearer(testcluster.Token)))
			ctx := ctxT(t, 30*time.Second)
			stream, err := client.WatchEvents(ctx, connect.NewRequest(&fakv1.WatchEventsRequest{SessionId: id}))
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			// Past several body deadlines, a new event still arrives.
			time.Sleep(5 * bodyTimeout)
			want := "after the deadline over " + name
			if _, err := appendText(ctx, c, n, id, want); err != nil {
				t.Fatal(err)
			}
			for stream.Receive() {
				for _, e := range stream.Msg().Events {
					if e.Text == want {
						return
					}
				}
			}
			t.Fatalf("the watch ended before the event: %v", stream.Err())
		})
	}
}
