package node_test

import (
	"crypto/tls"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	"github.com/fak-dev/fak/api/gateway"
	"github.com/fak-dev/fak/api/gateway/gatewaytest"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/cluster/devca"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// A reload (SIGHUP) rotates the tokens file without a restart: a token
// removed from it is refused, one added is accepted with its role, the
// node's own calls (its runner's writes) switch to the new operator
// token, and a file that does not load changes nothing. A follower's
// gateway charges its calls with the new token too (issue 32).
func TestReload_RotatesTheTokensFile(t *testing.T) {
	tokens := newTokenFiles(t)
	up := gatewaytest.New()
	t.Cleanup(up.Close)
	c := testcluster.New(t, testcluster.Options{TLS: true, EchoTurn: 20 * time.Millisecond, Configure: tokens.meteredNode(up)})
	leader := c.WaitForLeader(30 * time.Second)
	compute, via := c.Followers()[0], c.Followers()[1]
	id := createSession(t, c, compute, "rotate")
	term := attach(t, c, via, id, "terminal", "term")
	if err := takeLease(ctxT(t, 15*time.Second), c, via, id, term, false); err != nil {
		t.Fatal(err)
	}
	sessions := func(n *testcluster.Node, token string) fakv1connect.SessionServiceClient {
		return fakv1connect.NewSessionServiceClient(c.HTTPClient(), c.BaseURL(n), connect.WithInterceptors(apiclient.Bearer(token)))
	}
	reloadAll := func() {
		for _, n := range c.Nodes {
			if rep, err := n.Running().Reload(); err != nil || rep.Tokens != 2 {
				t.Fatalf("reload %s: %+v, %v", n.Name, rep, err)
			}
		}
	}

	// The old operator token goes, a new one and a read token come.
	for _, n := range c.Nodes {
		tokens.write(n.Name, "operator new-operator\nread new-reader\n")
	}
	reloadAll()
	for _, n := range c.Nodes {
		_, err := sessions(n, testcluster.Token).DescribeSession(ctxT(t, 10*time.Second), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("%s: the removed token: %v, want Unauthenticated", n.Name, err)
		}
		if _, err := sessions(n, "new-reader").DescribeSession(ctxT(t, 10*time.Second), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id})); err != nil {
			t.Fatalf("%s: the new read token: %v", n.Name, err)
		}
		_, err = sessions(n, "new-reader").AppendEvents(ctxT(t, 10*time.Second), connect.NewRequest(&fakv1.AppendEventsRequest{
			SessionId: id, Events: []*fakv1.EventInput{{Kind: "note", Text: "read only"}}}))
		if connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Fatalf("%s: a write with the read token: %v, want PermissionDenied", n.Name, err)
		}
	}
	// The compute node's runner writes the turn with the new operator
	// token (the old one is refused everywhere now).
	op := sessions(via, "new-operator")
	resp, err := op.Act(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.ActRequest{
		SessionId: id, AttachmentId: term, ExpectedEpoch: 1, Action: &fakv1.ActRequest_Input{Input: &fakv1.InputText{Text: "after the rotation"}}}))
	if err != nil {
		t.Fatalf("act with the new operator token: %v", err)
	}
	c.WaitFor(30*time.Second, "the turn after the rotation", func() bool {
		r, err := sessions(leader, "new-operator").ReadEvents(ctxT(t, 10*time.Second), connect.NewRequest(&fakv1.ReadEventsRequest{SessionId: id, FromSeq: resp.Msg.Seq, Limit: 100}))
		if err != nil {
			return false
		}
		text := ""
		for _, ev := range r.Msg.Events {
			if ev.Kind == "output" {
				text += ev.Text
			}
			if ev.Kind == "turn.completed" {
				return text == "echo: after the rotation"
			}
		}
		return false
	})

	// Each follower's gateway meters a call and charges it, proposing the
	// charge through the leader with the node's own credential: the new
	// operator token, read at each use. A metered answer ends once its
	// charge is committed, so the count is exact at once.
	queries := func() uint64 {
		d, err := sessions(leader, "new-operator").DescribeSession(ctxT(t, 10*time.Second), connect.NewRequest(&fakv1.DescribeSessionRequest{
			SessionId: id, Consistency: fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE}))
		if err != nil {
			t.Fatal(err)
		}
		return d.Msg.GetBudget().GetUsed().GetQueries()
	}
	q0 := queries()
	for i, n := range c.Followers() {
		hdr := map[string]string{gateway.HeaderTraceID: id, "X-Api-Key": "new-operator"}
		if code, body := gatewayCalls[1].do(t, c.HTTPClient(), c.BaseURL(n)+gateway.Prefix, 500+i, hdr); code != 200 {
			t.Fatalf("gateway call via %s after the rotation: %d %s", n.Name, code, body)
		}
		if q, want := queries(), q0+uint64(i+1); q != want {
			t.Fatalf("the gateway call via %s after the rotation was not charged: %d queries, want %d", n.Name, q, want)
		}
	}

	// A file that does not load (no operator token; missing) keeps what
	// is in use.
	tokens.write(compute.Name, "read only-a-reader\n")
	if _, err := compute.Running().Reload(); err == nil || !strings.Contains(err.Error(), "no operator token") {
		t.Fatalf("reload of a file without an operator token: %v", err)
	}
	os.Remove(tokens.path(compute.Name))
	if _, err := compute.Running().Reload(); err == nil || !strings.Contains(err.Error(), "nothing changed") {
		t.Fatalf("reload of a missing file: %v", err)
	}
	if _, err := sessions(compute, "new-operator").DescribeSession(ctxT(t, 10*time.Second), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id})); err != nil {
		t.Fatalf("after failed reloads the token in use: %v", err)
	}
}

// A reload puts a renewed node certificate in use for new connections; a
// certificate of another CA is refused and the one in use stays.
func TestReload_RenewsTheTLSCertificate(t *testing.T) {
	var mu sync.Mutex
	files := map[string][2]string{} // node → certificate, key
	c := testcluster.New(t, testcluster.Options{TLS: true, Configure: func(name string, cfg *node.Config) {
		mu.Lock()
		defer mu.Unlock()
		files[name] = [2]string{cfg.TLSCert, cfg.TLSKey}
	}})
	c.WaitForLeader(30 * time.Second)
	n := c.Followers()[0]
	mu.Lock()
	certFile, keyFile := files[n.Name][0], files[n.Name][1]
	mu.Unlock()
	served := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", n.APIAddr, c.ClientTLS())
		if err != nil {
			t.Fatalf("tls dial %s: %v", n.Name, err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
	}
	before := served()

	// install replaces the node's certificate files with a new pair of ca.
	install := func(ca *devca.CA) {
		t.Helper()
		pair, err := ca.Node(n.Name, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(certFile)
		os.Remove(keyFile)
		if err := pair.Write(certFile, keyFile, false); err != nil {
			t.Fatal(err)
		}
	}
	install(c.CA())
	rep, err := n.Running().Reload()
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	if rep.TLSSerial == before || served() != rep.TLSSerial {
		t.Fatalf("serial before %s, reloaded %s, served %s: want the renewed one served", before, rep.TLSSerial, served())
	}
	// The node still reaches its peers (its client side presents the new
	// certificate too): a write through it is forwarded to the leader.
	createSession(t, c, n, "after the renewal")

	other, _, err := devca.New("another CA")
	if err != nil {
		t.Fatal(err)
	}
	install(other)
	if _, err := n.Running().Reload(); err == nil || !strings.Contains(err.Error(), "not a node certificate of this CA") {
		t.Fatalf("reload of a foreign certificate: %v", err)
	}
	if got := served(); got != rep.TLSSerial {
		t.Fatalf("after a refused reload %s is served, want %s", got, rep.TLSSerial)
	}
}
