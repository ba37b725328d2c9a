package chaos

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// TestDockerFleet starts a Docker fleet and puts each of its operations
// through once: a write through a follower, kill and restart, pause, a
// partition by iptables and one by the disconnect fallback, and Close.
func TestDockerFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts containers")
	}
	if !DockerAvailable() {
		t.Skip("no Docker engine")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, err := BuildFak(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	start := time.Now()
	fleet, err := StartDockerFleet(DockerFleetConfig{FakBin: bin, Dir: dir, Token: chaosToken, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	df := fleet.(*dockerFleet)
	closed := false
	t.Cleanup(func() {
		if !closed {
			fleet.Close()
		}
		if t.Failed() {
			logTails(t, fleet.Logs())
		}
	})
	t.Logf("%s (started in %s)", fleet.Describe(), time.Since(start).Round(time.Millisecond))
	clients := newNodeClients(fleet, chaosToken)
	leader, err := waitLeader(ctx, clients, 90*time.Second)
	if err != nil {
		t.Fatalf("no leader: %v", err)
	}
	t.Logf("leader %s after %s", leader, time.Since(start).Round(time.Millisecond))

	session := createSession(ctx, t, clients["n2"])
	appendVia(ctx, t, clients["n2"], session, "v1")

	t.Run("kill and start", func(t *testing.T) {
		if err := fleet.Kill(leader); err != nil {
			t.Fatal(err)
		}
		if err := fleet.Kill(leader); err == nil {
			t.Error("killing a stopped node succeeded")
		}
		if l := waitLeaderAmong(ctx, t, clients, others(fleet, leader)); l == leader {
			t.Fatalf("killed %s still leads", leader)
		}
		appendVia(ctx, t, clients[others(fleet, leader)[0]], session, "v2")
		if err := fleet.Start(leader); err != nil {
			t.Fatal(err)
		}
		// The restarted node answers from its own data, caught up.
		waitStaleRead(ctx, t, clients[leader], session, []string{"v1", "v2"})
	})

	t.Run("pause and resume", func(t *testing.T) {
		if err := fleet.Pause("n3"); err != nil {
			t.Fatal(err)
		}
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		_, err := clients["n3"].cluster.Status(sctx, connect.NewRequest(&fakv1.StatusRequest{}))
		scancel()
		if err == nil {
			t.Error("a paused node answered")
		}
		if err := fleet.Resume("n3"); err != nil {
			t.Fatal(err)
		}
		waitStatus(ctx, t, clients["n3"])
	})

	// isolate cuts the current leader off by Partition, checks the other
	// two elect a leader, restarts the isolated node and heals;
	// clientReaches says whether the harness still reaches the isolated
	// node meanwhile.
	isolate := func(t *testing.T, clientReaches bool) string {
		l, err := waitLeader(ctx, clients, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		rest := others(fleet, l)
		if err := fleet.Net().Partition([]string{l}, rest); err != nil {
			t.Fatal(err)
		}
		if nl := waitLeaderAmong(ctx, t, clients, rest); nl == l {
			t.Fatalf("isolated %s still leads", l)
		}
		sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = clients[l].cluster.Status(sctx, connect.NewRequest(&fakv1.StatusRequest{}))
		scancel()
		if clientReaches && err != nil {
			t.Errorf("harness cannot reach isolated %s: %v", l, err)
		}
		if !clientReaches && err == nil {
			t.Errorf("disconnected %s still answers", l)
		}
		// Restarted while isolated, it must stay isolated (and, cut off
		// by disconnect, it dies at once and Heal starts it again).
		if err := fleet.Kill(l); err != nil {
			t.Fatal(err)
		}
		if err := fleet.Start(l); err != nil {
			t.Fatal(err)
		}
		if clientReaches {
			waitStatus(ctx, t, clients[l])
			if findLeader(ctx, map[string]*nodeClient{l: clients[l]}) == l {
				t.Errorf("isolated %s leads after its restart", l)
			}
		}
		if err := fleet.Net().Heal(); err != nil {
			t.Fatal(err)
		}
		if err := fleet.Net().Heal(); err != nil {
			t.Fatalf("second heal: %v", err)
		}
		appendVia(ctx, t, clients[l], session, "after-"+l)
		return l
	}

	t.Run("partition by iptables", func(t *testing.T) {
		if !df.net.nsenter {
			t.Skip("iptables in the containers' namespaces does not work here")
		}
		if dev := netDev(t, df, "n1"); dev != "eth0" {
			t.Errorf("n1's interface is %q", dev)
		}
		isolate(t, true)
		// A one-way block and (if netem works) latency apply and heal.
		if err := fleet.Net().Block("n1", "n2"); err != nil {
			t.Fatal(err)
		}
		if fleet.Net().Supports(Latency) {
			if err := fleet.Net().SetLatency("n1", "n3", 20*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		} else {
			t.Log("no tc netem: latency unsupported")
		}
		// A node started during a fault gets its rules again.
		if err := fleet.Kill("n2"); err != nil {
			t.Fatal(err)
		}
		if err := fleet.Start("n2"); err != nil {
			t.Fatal(err)
		}
		if got := iptablesDrops(t, df, "n2"); !slices.Equal(got, []string{df.nodes[0].ip.String()}) {
			t.Errorf("n2 drops from %v after restart, want n1's IP", got)
		}
		if err := fleet.Net().Heal(); err != nil {
			t.Fatal(err)
		}
		for _, n := range fleet.Nodes() {
			if got := iptablesDrops(t, df, n); len(got) != 0 {
				t.Errorf("%s still drops from %v after Heal", n, got)
			}
		}
	})

	t.Run("partition by disconnect", func(t *testing.T) {
		df.net.mu.Lock()
		saved := df.net.nsenter
		df.net.nsenter = false
		df.net.mu.Unlock()
		defer func() {
			df.net.mu.Lock()
			df.net.nsenter = saved
			df.net.mu.Unlock()
		}()
		if fleet.Net().Supports(OneWay) || fleet.Net().Block("n1", "n2") == nil {
			t.Error("one-way block claimed without iptables")
		}
		l := isolate(t, false)
		// eth1 if it had been reconnected while running; here it was
		// restarted after, into a fresh namespace.
		t.Logf("%s's interface after reconnect: %s", l, netDev(t, df, l))
	})

	if _, err := waitLeader(ctx, clients, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	waitStaleRead(ctx, t, clients["n1"], session, nil)

	logs := fleet.Logs()
	if err := fleet.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	closed = true
	for _, p := range logs {
		if b, err := os.ReadFile(p); err != nil || !strings.Contains(string(b), "node started") {
			t.Errorf("log %s: %v, %d bytes", p, err, len(b))
		}
	}
	if out, err := runCmd(time.Minute, nil, "docker", "ps", "-aq", "--filter", "label="+dockerFleetLabel+"="+df.network); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("containers left after Close: %q %v", out, err)
	}
	if _, err := runCmd(time.Minute, nil, "docker", "network", "inspect", df.network); err == nil {
		t.Errorf("network %s left after Close", df.network)
	}
	t.Logf("total %s", time.Since(start).Round(time.Millisecond))
}

// logTails shows the end of each node's log.
func logTails(t *testing.T, paths []string) {
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		t.Logf("%s:\n%s", p, strings.Join(lines[max(0, len(lines)-25):], "\n"))
	}
}

func others(f Fleet, node string) []string {
	var out []string
	for _, n := range f.Nodes() {
		if n != node {
			out = append(out, n)
		}
	}
	return out
}

// waitLeaderAmong waits for a leader among nodes only.
func waitLeaderAmong(ctx context.Context, t *testing.T, clients map[string]*nodeClient, nodes []string) string {
	t.Helper()
	sub := map[string]*nodeClient{}
	for _, n := range nodes {
		sub[n] = clients[n]
	}
	l, err := waitLeader(ctx, sub, 30*time.Second)
	if err != nil {
		t.Fatalf("no leader among %v: %v", nodes, err)
	}
	return l
}

func createSession(ctx context.Context, t *testing.T, c *nodeClient) string {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.session.CreateSession(cctx, connect.NewRequest(&fakv1.CreateSessionRequest{
		Title: "docker", Objective: "docker fleet test", RequestId: "req_docker_test_create",
	}))
	if err != nil {
		t.Fatalf("create session via %s: %v", c.name, err)
	}
	return resp.Msg.GetSession().GetSessionId()
}

// appendVia appends one event through c, retrying while the fleet settles
// (same request id: the FSM deduplicates).
func appendVia(ctx context.Context, t *testing.T, c *nodeClient, session, value string) {
	t.Helper()
	req := &fakv1.AppendEventsRequest{SessionId: session, RequestId: "req_docker_test_" + value,
		Events: []*fakv1.EventInput{{Kind: chaosKind, Text: value}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := c.session.AppendEvents(cctx, connect.NewRequest(req))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("append %s via %s: %v", value, c.name, err)
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// waitStaleRead waits until c's own replica of session holds want (nil:
// whatever the linearizable read through c returns).
func waitStaleRead(ctx context.Context, t *testing.T, c *nodeClient, session string, want []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		w := want
		var err error
		if w == nil {
			w, err = readValues(cctx, c, session, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)
		}
		var got []string
		if err == nil {
			got, err = readValues(cctx, c, session, fakv1.ReadConsistency_READ_CONSISTENCY_STALE)
		}
		cancel()
		if err == nil && slices.Equal(got, w) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: replica of %s is %v (%v), want %v", c.name, session, got, err, w)
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

func waitStatus(ctx context.Context, t *testing.T, c *nodeClient) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.cluster.Status(cctx, connect.NewRequest(&fakv1.StatusRequest{}))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer: %v", c.name, err)
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

func netDev(t *testing.T, f *dockerFleet, node string) string {
	t.Helper()
	n, err := f.node(node)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := containerPID(n.container)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := netDevice(pid)
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// iptablesDrops lists the sources node's namespace drops.
func iptablesDrops(t *testing.T, f *dockerFleet, node string) []string {
	t.Helper()
	n, err := f.node(node)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := containerPID(n.container)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(time.Minute, nil, "nsenter", "-t", fmt.Sprint(pid), "-n", "iptables-save", "-t", "filter")
	if err != nil {
		t.Fatal(err)
	}
	var drops []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 6 && f[0] == "-A" && f[1] == "INPUT" && f[2] == "-s" && f[5] == "DROP" {
			drops = append(drops, strings.TrimSuffix(f[3], "/32"))
		}
	}
	return drops
}

// TestDockerFleetFailedStartCleansUp: a fleet whose containers cannot
// start (the "binary" is a script and the image has no shell) leaves no
// container or network behind.
func TestDockerFleetFailedStartCleansUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts containers")
	}
	if !DockerAvailable() {
		t.Skip("no Docker engine")
	}
	dir := t.TempDir()
	bin := dir + "/fak"
	script := fmt.Sprintf("#!/bin/sh\n# %d\n", time.Now().UnixNano())
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	const seed = -424242
	prefix := fmt.Sprintf("fakchaos-%d-", seed)
	f, err := StartDockerFleet(DockerFleetConfig{FakBin: bin, Dir: dir, Token: chaosToken, Seed: seed})
	if err == nil {
		f.Close()
		t.Fatal("a fleet of scripts started")
	}
	t.Logf("start failed as it should: %v", err)
	image, ierr := dockerImage(bin) // the same (already built) image
	if ierr == nil {
		t.Cleanup(func() { runCmd(time.Minute, nil, "docker", "image", "rm", image) })
	}
	if out, err := runCmd(time.Minute, nil, "docker", "ps", "-a", "--format", "{{.Names}}", "--filter", "name="+prefix); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("containers left: %q %v", out, err)
	}
	if out, err := runCmd(time.Minute, nil, "docker", "network", "ls", "--format", "{{.Name}}", "--filter", "name="+prefix); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("networks left: %q %v", out, err)
	}
}
