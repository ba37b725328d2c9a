package node_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// disks are the test fleet's injected storage faults, per node: full fails
// every write of the named stores with ENOSPC as a full disk does; held
// blocks the Raft log's writes until released.
type disks struct {
	mu   sync.Mutex
	full map[string]map[string]bool // node -> store -> full
	held map[string]chan struct{}   // node -> closed on release
	logs map[string]*syncBuffer
	// fatal: the errors OnStorageFull was called with, per node.
	fatal map[string][]string
}

func newDisks() *disks {
	return &disks{full: map[string]map[string]bool{}, held: map[string]chan struct{}{},
		logs: map[string]*syncBuffer{}, fatal: map[string][]string{}}
}

// configure gives each node its faults, a fatal hook that records (the
// agent's exits) and a logger the test reads.
func (d *disks) configure(name string, cfg *node.Config) {
	d.mu.Lock()
	if d.logs[name] == nil {
		d.logs[name] = &syncBuffer{}
	}
	buf := d.logs[name]
	d.mu.Unlock()
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Warn, Output: buf})
	dataDir := cfg.DataDir
	cfg.StoreFault = func(what string) error {
		d.mu.Lock()
		full, held := d.full[name][what], d.held[name]
		d.mu.Unlock()
		if full {
			return &fs.PathError{Op: "write", Path: filepath.Join(dataDir, what), Err: syscall.ENOSPC}
		}
		if held != nil && what == cluster.StoreLog {
			<-held
		}
		return nil
	}
	cfg.OnStorageFull = func(e *cluster.StorageError) {
		d.mu.Lock()
		d.fatal[name] = append(d.fatal[name], e.Error())
		d.mu.Unlock()
	}
}

func (d *disks) fill(name string, stores ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.full[name] = map[string]bool{}
	for _, s := range stores {
		d.full[name][s] = true
	}
}

func (d *disks) hold(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held[name] = make(chan struct{})
}

func (d *disks) release(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ch := d.held[name]; ch != nil {
		close(ch)
		delete(d.held, name)
	}
}

func (d *disks) fatals(name string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.fatal[name]...)
}

func (d *disks) log(name string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.logs[name].String()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func idx(v any) uint64 {
	f, _ := v.(float64)
	return uint64(f)
}

// A follower whose log cannot take the leader's entries keeps hearing
// heartbeats, so it knows the leader, and its own commit index stops where
// its log stops: applied == commit, which the old check called ready. It is
// ready only once it has applied what the leader has.
func TestHealthReadyFollowerBehindLeader(t *testing.T) {
	d := newDisks()
	c := testcluster.New(t, testcluster.Options{Configure: d.configure})
	leader := c.WaitForLeader(10 * time.Second)
	id := createSession(t, c, leader, "behind")
	f := c.Followers()[0]
	c.WaitFor(10*time.Second, f.Name+" ready", func() bool {
		code, _ := getReady(t, f)
		return code == http.StatusOK
	})

	d.hold(f.Name)
	t.Cleanup(func() { d.release(f.Name) }) // before the fleet stops
	for i := 0; i < 20; i++ {
		if _, err := appendText(ctxT(t, 10*time.Second), c, leader, id, text(i)); err != nil {
			t.Fatalf("append %d with one follower held: %v", i, err)
		}
	}
	var body map[string]any
	c.WaitFor(20*time.Second, f.Name+" catching up", func() bool {
		var code int
		code, body = getReady(t, f)
		// What the old check saw: its applied index at its own commit index.
		return code == http.StatusServiceUnavailable && strings.HasPrefix(body["status"].(string), "catching up: applied ") &&
			idx(body["applied_index"]) >= idx(body["commit_index"]) && idx(body["leader_index"]) > idx(body["applied_index"])
	})
	if body["leader"] != leader.Name {
		t.Fatalf("ready of %s: %v", f.Name, body)
	}
	t.Logf("held follower: %v", body)

	d.release(f.Name)
	c.WaitFor(20*time.Second, f.Name+" ready after release", func() bool {
		code, b := getReady(t, f)
		body = b
		return code == http.StatusOK && b["status"] == "ready"
	})
	if idx(body["applied_index"]) < idx(body["leader_index"]) {
		t.Fatalf("ready below the leader's index: %v", body)
	}
}

// A node whose disk fills stops with one line saying what, where and how
// much room (no panic), is never ready while full — not even restarted on
// the still-full disk — while the fleet serves on; with room again it
// catches up and is ready.
func TestStorageFullNodeStopsAndCatchesUp(t *testing.T) {
	d := newDisks()
	c := testcluster.New(t, testcluster.Options{Configure: d.configure})
	leader := c.WaitForLeader(10 * time.Second)
	id := createSession(t, c, leader, "full")
	f := c.Followers()[0]
	other := c.Followers()[1]
	c.WaitFor(10*time.Second, f.Name+" ready", func() bool {
		code, _ := getReady(t, f)
		return code == http.StatusOK
	})

	// The FSM's database is what filled first in the trial (it panicked).
	d.fill(f.Name, cluster.StoreFSM)
	n := 0
	appendOK := func(via *testcluster.Node) {
		t.Helper()
		if _, err := appendText(ctxT(t, 10*time.Second), c, via, id, text(n)); err != nil {
			t.Fatalf("append %d through %s with %s's disk full: %v", n, via.Name, f.Name, err)
		}
		n++
	}
	for i := 0; i < 10; i++ {
		appendOK(leader)
	}
	c.WaitFor(10*time.Second, f.Name+" stops", func() bool { return len(d.fatals(f.Name)) > 0 })
	want := "storage full: cannot write fsm.db in " + f.DataDir + ": no space left on device ("
	if got := d.fatals(f.Name); len(got) != 1 || !strings.HasPrefix(got[0], want) || !strings.Contains(got[0], " free of ") {
		t.Fatalf("fatal errors of %s: %q, want one starting %q", f.Name, got, want)
	}
	checkOneLine(t, d.log(f.Name), want)

	// The fleet serves on, through the leader and the other follower.
	for i := 0; i < 10; i++ {
		appendOK(leader)
		appendOK(other)
	}
	code, body := getReady(t, f)
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body["status"].(string), "storage failing: cannot write fsm.db in ") {
		t.Fatalf("ready of the full %s: HTTP %d %v", f.Name, code, body)
	}
	if lst := leader.Running().Cluster().Status(); lst.CommitIndex <= idx(body["applied_index"]) {
		t.Fatalf("leader's commit index %d, full %s applied %d", lst.CommitIndex, f.Name, idx(body["applied_index"]))
	}
	if code, _ := getReady(t, other); code != http.StatusOK {
		t.Fatalf("ready of %s: HTTP %d", other.Name, code)
	}

	// Restarted on a disk still full, it is not ready: its first store
	// fails again.
	c.Stop(f)
	d.fill(f.Name, cluster.StoreFSM, cluster.StoreLog)
	c.Start(f)
	appendOK(leader)
	c.WaitFor(20*time.Second, f.Name+" failing again after restart", func() bool {
		return len(d.fatals(f.Name)) >= 2
	})
	fatals := len(d.fatals(f.Name))
	t.Logf("%s restarted full: %q", f.Name, d.fatals(f.Name)[1:])
	code, body = getReady(t, f)
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body["status"].(string), "storage failing: ") {
		t.Fatalf("ready of %s restarted full: HTTP %d %v", f.Name, code, body)
	}

	// Room again: restarted, it catches up.
	c.Stop(f)
	d.fill(f.Name)
	c.Start(f)
	appendOK(leader)
	c.WaitFor(30*time.Second, f.Name+" ready with room", func() bool {
		code, b := getReady(t, f)
		body = b
		return code == http.StatusOK
	})
	want2 := leader.Running().FSM().AppliedIndex()
	c.WaitFor(10*time.Second, f.Name+" applied the leader's index", func() bool {
		return f.Running().FSM().AppliedIndex() >= want2
	})
	if len(d.fatals(f.Name)) != fatals {
		t.Fatalf("fatal errors after room: %q", d.fatals(f.Name))
	}
}

// checkOneLine: the log has exactly one line with want, and no panic.
func checkOneLine(t *testing.T, log, want string) {
	t.Helper()
	lines := 0
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, want) {
			lines++
			if !strings.Contains(l, "[ERROR]") {
				t.Errorf("not an error line: %q", l)
			}
		}
	}
	if lines != 1 || strings.Contains(log, "panic") || strings.Contains(log, "goroutine ") {
		t.Fatalf("want one line with %q and no panic; log:\n%s", want, log)
	}
}

// Under mutual TLS a follower asks the leader for its index over https
// with its node certificate.
func TestHealthReadyTLS(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{TLS: true})
	leader := c.WaitForLeader(10 * time.Second)
	createSession(t, c, leader, "ready over tls")
	for _, n := range c.Followers() {
		var code int
		var body map[string]any
		c.WaitFor(10*time.Second, n.Name+" ready", func() bool {
			resp, err := c.HTTPClient().Get(c.BaseURL(n) + "/v1/health/ready")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			body = nil
			_ = json.NewDecoder(resp.Body).Decode(&body)
			code = resp.StatusCode
			return code == http.StatusOK
		})
		if body["status"] != "ready" || idx(body["leader_index"]) == 0 {
			t.Fatalf("ready of %s: HTTP %d %v", n.Name, code, body)
		}
	}
}
