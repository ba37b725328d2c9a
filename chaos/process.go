package chaos

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fak-dev/fak/chaos/netproxy"
	"github.com/fak-dev/fak/internal/freeport"
)

// processFleet is three `fak agent` processes on loopback. Node i binds its
// real ports on its own address 127.0.0.(10+i) and advertises addresses of
// the fault-injecting proxy instead, so every byte between nodes crosses
// the proxy; the harness's clients call the real API ports directly.
type processFleet struct {
	bin    string
	dir    string
	token  string
	logger hclog.Logger
	net    *netproxy.Network
	nodes  []*procNode
	extra  []string
}

type procNode struct {
	name    string
	ip      net.IP
	args    []string
	api     string // real API address (clients)
	logPath string
	bin     string // the fak binary it runs; "" means the fleet's

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// ProcessFleetConfig configures StartProcessFleet.
type ProcessFleetConfig struct {
	FakBin string // path to the fak binary
	Dir    string // data dirs, logs and the token file go here
	Nodes  int    // default 3
	Token  string
	Logger hclog.Logger
	// ExtraArgs are passed to every `fak agent`.
	ExtraArgs []string
}

// StartProcessFleet starts the processes and proxies; the fleet forms by
// itself (--bootstrap-expect).
func StartProcessFleet(cfg ProcessFleetConfig) (Fleet, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	tokenFile := filepath.Join(cfg.Dir, "tokens")
	if err := os.WriteFile(tokenFile, []byte(cfg.Token+"\n"), 0o600); err != nil {
		return nil, err
	}
	f := &processFleet{bin: cfg.FakBin, dir: cfg.Dir, token: cfg.Token, logger: cfg.Logger,
		net: netproxy.New(cfg.Logger.Named("netproxy")), extra: cfg.ExtraArgs}
	type addrs struct{ api, raft, gossip, pAPI, pRaft, pGossip string }
	all := make([]addrs, cfg.Nodes)
	for i := range cfg.Nodes {
		name := fmt.Sprintf("n%d", i+1)
		ip := net.IPv4(127, 0, 0, byte(11+i))
		f.net.AddNode(name, ip)
		var a addrs
		var err error
		ports := make([]int, 6)
		for j := range ports {
			if ports[j], err = freePort(ip); err != nil {
				f.Close()
				return nil, err
			}
		}
		host := ip.String()
		hp := func(p int) string { return net.JoinHostPort(host, strconv.Itoa(p)) }
		a.api, a.raft, a.gossip = hp(ports[0]), hp(ports[1]), hp(ports[2])
		if a.pAPI, err = f.net.ProxyTCP(name, hp(ports[3]), a.api); err == nil {
			if a.pRaft, err = f.net.ProxyTCP(name, hp(ports[4]), a.raft); err == nil {
				if a.pGossip, err = f.net.ProxyTCP(name, hp(ports[5]), a.gossip); err == nil {
					_, err = f.net.ProxyUDP(name, hp(ports[5]), a.gossip)
				}
			}
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("proxy for %s: %w", name, err)
		}
		all[i] = a
		f.nodes = append(f.nodes, &procNode{name: name, ip: ip, api: a.api,
			logPath: filepath.Join(cfg.Dir, name+".log")})
	}
	for i, n := range f.nodes {
		a := all[i]
		n.args = []string{"agent", "--name", n.name,
			"--data-dir", filepath.Join(cfg.Dir, n.name),
			"--api-addr", a.api, "--raft-addr", a.raft, "--gossip-addr", a.gossip,
			"--advertise-api", a.pAPI, "--advertise-raft", a.pRaft, "--advertise-gossip", a.pGossip,
			"--bootstrap-expect", strconv.Itoa(cfg.Nodes), "--token-file", tokenFile,
		}
		for j, o := range all {
			if j != i {
				n.args = append(n.args, "--join", o.pGossip)
			}
		}
		n.args = append(n.args, f.extra...)
	}
	for _, n := range f.nodes {
		if err := f.Start(n.name); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// freePort finds a port free for both TCP and UDP on ip (gossip needs
// both), outside the ephemeral range so a restarted node can bind it again.
func freePort(ip net.IP) (int, error) {
	ports, err := freeport.Pick(ip, 1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

func (f *processFleet) node(name string) (*procNode, error) {
	for _, n := range f.nodes {
		if n.name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node %q", name)
}

func (f *processFleet) Nodes() []string {
	out := make([]string, len(f.nodes))
	for i, n := range f.nodes {
		out[i] = n.name
	}
	return out
}

func (f *processFleet) APIAddr(node string) string {
	n, err := f.node(node)
	if err != nil {
		return ""
	}
	return n.api
}

func (f *processFleet) Start(node string) error {
	n, err := f.node(node)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("%s is already running", node)
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(cmp.Or(n.bin, f.bin), n.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: a ^C to the harness must not reach the nodes
	// before the harness has recorded what it needs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", node, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	n.cmd, n.done = cmd, done
	return nil
}

func (f *processFleet) Kill(node string) error {
	n, err := f.node(node)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("%s is not running", node)
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-n.done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s did not die after SIGKILL", node)
	}
	n.cmd, n.done = nil, nil
	return nil
}

// Upgrade stops node cleanly (SIGTERM, as systemd does; SIGKILL after a
// minute) and starts it again running bin.
func (f *processFleet) Upgrade(node, bin string) error {
	n, err := f.node(node)
	if err != nil {
		return err
	}
	n.mu.Lock()
	if n.cmd != nil {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.done:
		case <-time.After(time.Minute):
			_ = n.cmd.Process.Signal(syscall.SIGKILL)
			<-n.done
		}
		n.cmd, n.done = nil, nil
	}
	n.bin = bin
	n.mu.Unlock()
	return f.Start(node)
}

// LogStore reads the Raft log store off node's data dir.
func (f *processFleet) LogStore(node string) string {
	raftDir := filepath.Join(f.dir, node, "raft")
	_, errWAL := os.Stat(filepath.Join(raftDir, "wal"))
	_, errBolt := os.Stat(filepath.Join(raftDir, "raft.db"))
	switch {
	case errWAL == nil && errBolt == nil:
		return "both"
	case errWAL == nil:
		return "wal"
	case errBolt == nil:
		return "raft-boltdb"
	}
	return "none"
}

func (f *processFleet) signal(node string, sig syscall.Signal) error {
	n, err := f.node(node)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("%s is not running", node)
	}
	return n.cmd.Process.Signal(sig)
}

func (f *processFleet) Pause(node string) error  { return f.signal(node, syscall.SIGSTOP) }
func (f *processFleet) Resume(node string) error { return f.signal(node, syscall.SIGCONT) }

func (f *processFleet) Net() Network { return proxyNetwork{f.net} }

func (f *processFleet) Describe() string {
	return fmt.Sprintf("%d fak agent processes on 127.0.0.11-%d behind a fault-injecting TCP/UDP proxy", len(f.nodes), 10+len(f.nodes))
}

func (f *processFleet) Logs() []string {
	out := make([]string, len(f.nodes))
	for i, n := range f.nodes {
		out[i] = n.logPath
	}
	return out
}

func (f *processFleet) Close() error {
	for _, n := range f.nodes {
		n.mu.Lock()
		if n.cmd != nil {
			_ = n.cmd.Process.Signal(syscall.SIGKILL)
			<-n.done
			n.cmd = nil
		}
		n.mu.Unlock()
	}
	return f.net.Close()
}

// proxyNetwork adapts the netproxy to the Network interface.
type proxyNetwork struct{ n *netproxy.Network }

func (p proxyNetwork) Partition(groups ...[]string) error { p.n.Partition(groups...); return nil }
func (p proxyNetwork) Block(from, to string) error        { p.n.Block(from, to); return nil }
func (p proxyNetwork) SetLatency(from, to string, d time.Duration) error {
	p.n.SetLatency(from, to, d)
	return nil
}
func (p proxyNetwork) Heal() error                 { p.n.Heal(); return nil }
func (p proxyNetwork) Supports(k NemesisKind) bool { return true }
