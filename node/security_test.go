package node_test

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/cluster/devca"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

func gossipKey(t *testing.T) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(k)
}

// secureFleet is a 3-node fleet with an encrypted gossip key and mutual TLS.
func secureFleet(t *testing.T, key string) *testcluster.Cluster {
	return testcluster.New(t, testcluster.Options{GossipKeys: []string{key}, TLS: true, EchoTurn: 50 * time.Millisecond})
}

// gossipMembers counts the members a node's gossip has seen alive.
func aliveMembers(n *testcluster.Node) []string {
	var out []string
	for _, m := range n.Running().Cluster().Members() {
		if m.Status == cluster.StatusAlive {
			out = append(out, m.Name)
		}
	}
	return out
}

// A fleet with gossip encryption and mutual TLS forms and elects; a write
// through a follower is forwarded to the leader over TLS, a linearizable
// read on a follower fetches the read index over TLS, and the runner of
// a follower writes a turn through its own API over TLS.
func TestSecurity_FleetWithGossipKeyAndTLS(t *testing.T) {
	c := secureFleet(t, gossipKey(t))
	leader := c.WaitForLeader(30 * time.Second)
	peers, err := c.ClusterClient(leader).RaftPeers(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.RaftPeersRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(peers.Msg.Peers) != 3 {
		t.Fatalf("raft peers = %d, want 3", len(peers.Msg.Peers))
	}
	// The API speaks TLS: HTTP/1.1 to the fleet's unary calls, HTTP/2 to
	// its streams (apiclient's split transport), negotiated by ALPN.
	for _, call := range []struct{ contentType, want string }{{"application/proto", "HTTP/1.1"}, {"application/connect+proto", "HTTP/2.0"}} {
		req, err := http.NewRequest("GET", c.BaseURL(leader)+"/v1/health", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", call.contentType)
		resp, err := c.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Proto != call.want || resp.TLS == nil {
			t.Fatalf("a %s call answered over %s, tls %v; want %s over TLS", call.contentType, resp.Proto, resp.TLS != nil, call.want)
		}
	}

	fs := c.Followers()
	compute, via := fs[0], fs[1]
	id := createSession(t, c, compute, "secure")
	if _, err := appendText(ctxT(t, 15*time.Second), c, via, id, "through a follower"); err != nil {
		t.Fatalf("append via follower %s: %v", via.Name, err)
	}
	evs := readAll(t, c, via, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)
	if last := evs[len(evs)-1]; last.Text != "through a follower" {
		t.Fatalf("last event on %s = %q", via.Name, last.Text)
	}

	term := attach(t, c, via, id, "terminal", "term")
	if err := takeLease(ctxT(t, 15*time.Second), c, via, id, term, false); err != nil {
		t.Fatal(err)
	}
	hello := mustAct(t, c, via, id, term, "hello")
	evs = waitJournal(t, c, leader, id, "the turn for hello", turnDone(t, hello))
	if got := transcript(turnOf(t, evs, hello)); !strings.Contains(got, "output:echo: hello") {
		t.Fatalf("turn:\n%s", got)
	}
}

// A node with a wrong gossip key, or none, cannot join an encrypted
// fleet: its join fails and nobody counts it as a member; a node holding
// the fleet's key as its second key (the middle of a rotation) joins.
func TestSecurity_GossipKeyGatesMembership(t *testing.T) {
	key := gossipKey(t)
	c := testcluster.New(t, testcluster.Options{GossipKeys: []string{key}})
	seed := []string{c.Nodes[0].GossipAddr, c.Nodes[1].GossipAddr}

	for _, tc := range []struct {
		name string
		keys []string
	}{{"wrong key", []string{gossipKey(t)}}, {"no key", nil}} {
		rogue := c.AddNodeWith(false, func(cfg *node.Config) { cfg.GossipKeys = tc.keys })
		for i := 0; i < 3; i++ {
			if n, err := rogue.Running().Cluster().Join(seed); err == nil || n != 0 {
				t.Fatalf("%s: join contacted %d nodes, err %v; want an error", tc.name, n, err)
			}
		}
		for _, n := range c.Nodes[:3] {
			if got := aliveMembers(n); len(got) != 3 {
				t.Fatalf("%s: %s sees members %v; want the 3 fleet nodes", tc.name, n.Name, got)
			}
		}
		if got := aliveMembers(rogue); len(got) != 1 {
			t.Fatalf("%s: the rogue node sees members %v; want only itself", tc.name, got)
		}
		c.Stop(rogue)
	}

	// Rotation, first step: a node that already accepts a new key but
	// still encrypts with the fleet's joins.
	next := gossipKey(t)
	joiner := c.AddNodeWith(false, func(cfg *node.Config) { cfg.GossipKeys = []string{key, next} })
	c.WaitFor(20*time.Second, "the rotating node as a member and raft non-voter", func() bool {
		peers, err := c.Leader().Running().Cluster().Peers()
		if err != nil {
			return false
		}
		for _, p := range peers {
			if p.ID == joiner.Name {
				return true
			}
		}
		return false
	})
}

// A node whose certificate comes from another CA holds the gossip key and
// so joins gossip, but it cannot pass as a node on Raft: the leader's
// handshake with it fails, so it never enters the Raft configuration and
// never receives an entry; its own dials to the fleet are refused.
func TestSecurity_ForeignCertificateCannotJoinRaft(t *testing.T) {
	key := gossipKey(t)
	c := secureFleet(t, key)
	files := foreignNodeFiles(t, "n4")
	rogue := c.AddNodeWith(true, func(cfg *node.Config) {
		cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = files.Cert, files.Key, files.CA
	})
	c.WaitFor(20*time.Second, "every fleet node to see the rogue node alive in gossip", func() bool {
		for _, n := range c.Nodes[:3] {
			if len(aliveMembers(n)) != 4 {
				return false
			}
		}
		return true
	})
	// The leader reconciles every second and on each gossip event: watch
	// several rounds while the fleet keeps committing.
	id := createSession(t, c, fleetLeader(c), "rogue")
	deadline := time.Now().Add(4 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if _, err := appendText(ctxT(t, 15*time.Second), c, c.Nodes[i%3], id, text(i)); err != nil {
			t.Fatal(err)
		}
		peers, err := fleetLeader(c).Running().Cluster().Peers()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range peers {
			if p.ID == rogue.Name {
				t.Fatalf("the node with a foreign certificate entered the raft configuration: %+v", peers)
			}
		}
		if idx := rogue.Running().Cluster().Raft().LastIndex(); idx != 0 {
			t.Fatalf("the node with a foreign certificate holds raft log index %d", idx)
		}
	}

	// Raft dials between the two CAs fail in both directions.
	leader := fleetLeader(c)
	rogueTLS, err := cluster.LoadNodeTLS(files.Cert, files.Key, files.CA)
	if err != nil {
		t.Fatal(err)
	}
	// The rogue's certificate, presented to the leader (trusting the
	// leader's CA, so only the leader's verdict counts).
	asRogue := rogueTLS.PeerClientConfig()
	asRogue.RootCAs = c.ClientTLS().RootCAs
	if err := raftHandshake(leader.RaftAddr, asRogue); err == nil {
		t.Fatal("the leader accepted a raft connection with a certificate of another CA")
	}
	if err := raftHandshake(leader.RaftAddr, rogueTLS.PeerClientConfig()); err == nil {
		t.Fatal("the rogue node verified the leader's certificate")
	}
	if err := raftHandshake(rogue.RaftAddr, c.ClientTLS()); err == nil {
		t.Fatal("the fleet's client verified the rogue node's raft certificate")
	}
	// A client certificate of the fleet's own CA is no node certificate:
	// the Raft port refuses it.
	if err := raftHandshake(leader.RaftAddr, withServerName(c.ClientTLS(), cluster.TLSServerName)); err == nil {
		t.Fatal("a client certificate was accepted on the raft port")
	}
}

// fleetLeader waits for a ready leader among the fleet (a rogue node
// never learns it, so WaitForLeader's "known to every node" cannot hold).
func fleetLeader(c *testcluster.Cluster) *testcluster.Node {
	var l *testcluster.Node
	c.WaitFor(10*time.Second, "a ready leader", func() bool { l = c.Leader(); return l != nil })
	return l
}

// raftHandshake (also used on the API port) dials addr with cfg and
// completes the exchange far enough
// to see the peer's verdict: with TLS 1.3 a client learns that the server
// refused its certificate only on its first read.
func raftHandshake(addr string, cfg *tls.Config) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil // accepted: the server waits for a raft command
	}
	return err
}

func withServerName(cfg *tls.Config, name string) *tls.Config {
	cfg.ServerName = name
	return cfg
}

// foreignNodeFiles writes a CA unrelated to any fleet and a node
// certificate from it.
func foreignNodeFiles(t *testing.T, name string) apiclient.TLSFiles {
	t.Helper()
	dir := t.TempDir()
	ca, caPair, err := devca.New("foreign CA")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Node(name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := apiclient.TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem")}
	if err := os.WriteFile(f.CA, caPair.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pair.Write(f.Cert, f.Key, false); err != nil {
		t.Fatal(err)
	}
	return f
}

// The API of a fleet with mutual TLS refuses a client without a
// certificate and one with a certificate of another CA; a client
// certificate of the fleet's CA gets through.
func TestSecurity_APIRequiresClientCertificate(t *testing.T) {
	c := secureFleet(t, gossipKey(t))
	leader := c.WaitForLeader(30 * time.Second)
	good := c.IssueClient("operator")
	foreign := foreignNodeFiles(t, "stranger")

	call := func(files apiclient.TLSFiles) error {
		cfg, err := files.Config()
		if err != nil {
			t.Fatal(err)
		}
		hc := apiclient.NewTLSHTTPClient(cfg, nil)
		defer hc.CloseIdleConnections()
		cl := fakv1connect.NewClusterServiceClient(hc, c.BaseURL(leader), connect.WithInterceptors(apiclient.Bearer(testcluster.Token)))
		_, err = cl.RaftPeers(ctxT(t, 10*time.Second), connect.NewRequest(&fakv1.RaftPeersRequest{}))
		return err
	}
	if err := call(apiclient.TLSFiles{CA: good.CA}); err == nil {
		t.Fatal("without a client certificate: the call succeeded")
	}
	if err := call(apiclient.TLSFiles{CA: good.CA, Cert: foreign.Cert, Key: foreign.Key}); err == nil {
		t.Fatal("with a certificate of another CA: the call succeeded")
	}
	if err := call(good); err != nil {
		t.Fatalf("with the fleet's client certificate: %v", err)
	}
	// At the TLS level: the server's verdict on each certificate.
	for _, tc := range []struct {
		name  string
		files apiclient.TLSFiles
		ok    bool
	}{
		{"no certificate", apiclient.TLSFiles{CA: good.CA}, false},
		{"another CA", apiclient.TLSFiles{CA: good.CA, Cert: foreign.Cert, Key: foreign.Key}, false},
		{"the fleet's CA", good, true},
	} {
		cfg, err := tc.files.Config()
		if err != nil {
			t.Fatal(err)
		}
		err = raftHandshake(leader.APIAddr, cfg)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "tls")) {
			t.Errorf("api handshake with %s: %v; want ok=%v (refusals are tls alerts)", tc.name, err, tc.ok)
		}
	}
	// Plaintext h2c against the TLS port fails too.
	hc := apiclient.NewHTTPClient()
	defer hc.CloseIdleConnections()
	if resp, err := hc.Get("http://" + leader.APIAddr + "/v1/health"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plaintext request answered 200 by a TLS node")
		}
	}
}
