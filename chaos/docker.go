package chaos

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Docker mode runs the fleet as containers n1..nN on a private bridge
// network, one fixed IP each. The harness, on the host, reaches every API
// through the bridge directly. Network faults are injected from the host
// inside each container's network namespace (nsenter + iptables, tc netem),
// so client traffic from the host is never faulted; where that is not
// possible (no root, no nsenter) partitions fall back to `docker network
// disconnect`, which also cuts the harness off the isolated node.

const (
	// dockerLabel marks every container and network the harness creates,
	// so strays can be found (`docker ps -a --filter label=fak.chaos=1`).
	dockerLabel = "fak.chaos"
	// dockerFleetLabel names the fleet (its network) a container belongs
	// to, so Close removes exactly its own containers.
	dockerFleetLabel = "fak.chaos.fleet"

	dockerAPIPort    = 7401
	dockerRaftPort   = 7501
	dockerGossipPort = 7601

	dockerCmdTimeout   = time.Minute
	dockerBuildTimeout = 5 * time.Minute
)

// dockerfile wraps the static fak binary; FROM scratch because the harness
// must not need a registry.
const dockerfile = "FROM scratch\nCOPY fak /fak\nENTRYPOINT [\"/fak\"]\n"

// DockerFleetConfig configures StartDockerFleet.
type DockerFleetConfig struct {
	FakBin string // a static (CGO_ENABLED=0) fak binary
	Dir    string // node data dirs, the token file and node logs go here
	Token  string
	Seed   int64 // part of the network's name
	Nodes  int   // default 3
	Logger hclog.Logger
	// ExtraArgs are appended to every node's `fak agent` command line.
	ExtraArgs []string
	// AgentConfig, when set, is called once the network exists with its
	// gateway — the host's address on the bridge, where containers reach
	// services of the harness — and returns an agent config file every
	// node reads (--config); "" for none.
	AgentConfig func(gateway net.IP) (string, error)
}

// DockerAvailable reports whether a Docker engine answers.
func DockerAvailable() bool {
	_, err := runCmd(5*time.Second, nil, "docker", "version", "--format", "{{.Server.Version}}")
	return err == nil
}

type dockerFleet struct {
	logger    hclog.Logger
	extraArgs []string
	config    string // agent config file on the host ("" for none)
	image     string
	network   string // also the containers' name prefix
	subnet    *net.IPNet
	nodes     []*dockerNode
	net       *dockerNet

	closeMu sync.Mutex
	closed  bool
}

type dockerNode struct {
	name      string // n1
	container string // <network>-n1
	ip        net.IP
	logPath   string

	mu      sync.Mutex  // serializes Start and Kill
	running atomic.Bool // the harness wants it running (Start/Kill)
}

// StartDockerFleet builds the image, creates the network and starts the
// containers; the fleet forms by itself (--bootstrap-expect). On error
// everything created so far is removed again.
func StartDockerFleet(cfg DockerFleetConfig) (Fleet, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.Nodes < 1 || cfg.Nodes > 200 {
		return nil, fmt.Errorf("docker fleet: %d nodes (1-200: their IPs are .11 up in a /24)", cfg.Nodes)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	// Bind mounts need absolute paths.
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	fleetDir := filepath.Join(dir, "docker")
	if err := os.MkdirAll(fleetDir, 0o755); err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(fleetDir, "tokens")
	if err := os.WriteFile(tokenFile, []byte(cfg.Token+"\n"), 0o600); err != nil {
		return nil, err
	}
	f := &dockerFleet{logger: cfg.Logger, extraArgs: cfg.ExtraArgs}
	if f.image, err = dockerImage(cfg.FakBin); err != nil {
		return nil, err
	}
	if f.network, f.subnet, err = createDockerNetwork(cfg.Seed); err != nil {
		return nil, err
	}
	f.net = &dockerNet{f: f, drop: map[link]bool{}, delay: map[link]time.Duration{}, cut: map[string]bool{}}
	if cfg.AgentConfig != nil {
		if err := f.writeAgentConfig(fleetDir, cfg.AgentConfig); err != nil {
			f.Close()
			return nil, err
		}
	}
	for i := range cfg.Nodes {
		name := fmt.Sprintf("n%d", i+1)
		f.nodes = append(f.nodes, &dockerNode{
			name: name, container: f.network + "-" + name, ip: hostIP(f.subnet, 11+i),
			logPath: filepath.Join(dir, name+".log"),
		})
	}
	for _, n := range f.nodes {
		dataDir := filepath.Join(fleetDir, n.name)
		if err := os.MkdirAll(dataDir, 0o755); err == nil {
			err = f.create(n, dataDir, tokenFile)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("create %s: %w", n.name, err)
		}
	}
	for _, n := range f.nodes {
		if err := f.Start(n.name); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := f.checkAlive(); err != nil {
		f.Close()
		return nil, err
	}
	f.net.probe()
	f.logger.Info("docker fleet started", "fleet", f.Describe())
	return f, nil
}

// writeAgentConfig writes the config file AgentConfig makes for the
// network's gateway.
func (f *dockerFleet) writeAgentConfig(dir string, make func(net.IP) (string, error)) error {
	gw := hostIP(f.subnet, 1) // Docker's default gateway for a subnet we chose
	if out, err := runCmd(dockerCmdTimeout, nil, "docker", "network", "inspect", "--format",
		"{{range .IPAM.Config}}{{.Gateway}}{{end}}", f.network); err == nil {
		if ip := net.ParseIP(strings.TrimSpace(out)); ip != nil {
			gw = ip
		}
	}
	text, err := make(gw)
	if err != nil || text == "" {
		return err
	}
	f.config = filepath.Join(dir, "agent.hcl")
	return os.WriteFile(f.config, []byte(text), 0o644)
}

// checkAlive fails if a container has already exited, so that a binary
// that cannot run in the image (not static, wrong architecture) or a bad
// flag is reported at once, with the node's last words, rather than as
// a fleet that never elects a leader.
func (f *dockerFleet) checkAlive() error {
	time.Sleep(500 * time.Millisecond)
	for _, n := range f.nodes {
		out, err := runCmd(dockerCmdTimeout, nil, "docker", "inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}", n.container)
		if err != nil {
			return err
		}
		if running, code, _ := strings.Cut(strings.TrimSpace(out), " "); running != "true" {
			return fmt.Errorf("%s exited at once with code %s; its log ends: %s", n.name, code, logTail(n.container, 5))
		}
	}
	return nil
}

// dockerImage returns the tag of an image holding bin, building it unless
// an image for the same binary (by content hash) already exists.
func dockerImage(bin string) (string, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	tag := "fak-chaos:" + hex.EncodeToString(sum[:6])
	if _, err := runCmd(dockerCmdTimeout, nil, "docker", "image", "inspect", tag); err == nil {
		return tag, nil
	}
	ctxDir, err := os.MkdirTemp("", "fak-chaos-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(ctxDir)
	if err := os.WriteFile(filepath.Join(ctxDir, "fak"), b, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return "", err
	}
	if _, err := runCmd(dockerBuildTimeout, nil, "docker", "build", "-q", "--label", dockerLabel+"=1", "-t", tag, ctxDir); err != nil {
		return "", err
	}
	return tag, nil
}

// createDockerNetwork creates a uniquely named bridge network. Fixed
// container IPs (which fak's addresses are built from) need a subnet we
// choose, so it tries a few candidates until one collides neither with
// another Docker network nor with a host interface.
func createDockerNetwork(seed int64) (string, *net.IPNet, error) {
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("fakchaos-%d-%s", seed, hex.EncodeToString(rnd[:3]))
	var errs []error
	for _, subnet := range subnetCandidates(rnd[3]) {
		if hostUses(subnet) {
			continue
		}
		_, err := runCmd(dockerCmdTimeout, nil, "docker", "network", "create", "--driver", "bridge",
			"--subnet", subnet.String(), "--label", dockerLabel+"=1", "--label", dockerFleetLabel+"="+name, name)
		if err == nil {
			return name, subnet, nil
		}
		// Docker says "Pool overlaps with other one on this address space".
		if !strings.Contains(err.Error(), "overlap") {
			return "", nil, err
		}
		errs = append(errs, err)
	}
	return "", nil, fmt.Errorf("no free subnet for the docker network: %w", errors.Join(errs...))
}

// subnetCandidates are /24s in 172.29.0.0/16 and 10.210.0.0/16, starting at
// a random offset so concurrent fleets rarely try the same one first.
func subnetCandidates(r byte) []*net.IPNet {
	var out []*net.IPNet
	mask := net.CIDRMask(24, 32)
	for i := range 6 {
		out = append(out, &net.IPNet{IP: net.IPv4(172, 29, r+byte(i)*37, 0).To4(), Mask: mask})
		out = append(out, &net.IPNet{IP: net.IPv4(10, 210, r+byte(i)*41, 0).To4(), Mask: mask})
	}
	return out
}

// hostUses reports whether a host interface address lies in subnet (a
// bridge there would shadow part of the host's network).
func hostUses(subnet *net.IPNet) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && (subnet.Contains(ipn.IP) || ipn.Contains(subnet.IP)) {
			return true
		}
	}
	return false
}

// hostIP is the host'th address of an IPv4 /24.
func hostIP(subnet *net.IPNet, host int) net.IP {
	ip := slices.Clone(subnet.IP.To4())
	ip[3] = byte(host)
	return ip
}

func hostPort(ip net.IP, port int) string { return net.JoinHostPort(ip.String(), strconv.Itoa(port)) }

// create makes n's container (not started). It runs as the harness's user
// so the bind-mounted data dir stays removable by it.
func (f *dockerFleet) create(n *dockerNode, dataDir, tokenFile string) error {
	args := []string{"create", "--name", n.container, "--hostname", n.name,
		"--label", dockerLabel + "=1", "--label", dockerFleetLabel + "=" + f.network,
		"--network", f.network, "--ip", n.ip.String(),
		"--user", fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()),
		"--log-driver", "json-file",
		"--mount", "type=bind,src=" + dataDir + ",dst=/data",
		"--mount", "type=bind,src=" + tokenFile + ",dst=/tokens,readonly",
	}
	if f.config != "" {
		args = append(args, "--mount", "type=bind,src="+f.config+",dst=/agent.hcl,readonly")
	}
	args = append(args, f.image,
		"agent", "--name", n.name, "--data-dir", "/data",
		"--api-addr", hostPort(n.ip, dockerAPIPort),
		"--raft-addr", hostPort(n.ip, dockerRaftPort),
		"--gossip-addr", hostPort(n.ip, dockerGossipPort),
		"--bootstrap-expect", strconv.Itoa(len(f.nodes)),
		"--token-file", "/tokens",
	)
	if f.config != "" {
		args = append(args, "--config", "/agent.hcl")
	}
	args = append(args, f.extraArgs...)
	for _, o := range f.nodes {
		if o != n {
			args = append(args, "--join", hostPort(o.ip, dockerGossipPort))
		}
	}
	_, err := runCmd(dockerCmdTimeout, nil, "docker", args...)
	return err
}

func (f *dockerFleet) node(name string) (*dockerNode, error) {
	for _, n := range f.nodes {
		if n.name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node %q", name)
}

func (f *dockerFleet) Nodes() []string {
	out := make([]string, len(f.nodes))
	for i, n := range f.nodes {
		out[i] = n.name
	}
	return out
}

func (f *dockerFleet) APIAddr(node string) string {
	n, err := f.node(node)
	if err != nil {
		return ""
	}
	return hostPort(n.ip, dockerAPIPort)
}

// Start starts node's container from its data and re-applies the network
// faults in force: a container gets a fresh network namespace on every
// start. (Until they are applied, a few milliseconds, the new process is
// unfaulted; fak is still opening its data then.)
func (f *dockerFleet) Start(node string) error {
	n, err := f.node(node)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, err := runCmd(dockerCmdTimeout, nil, "docker", "start", n.container); err != nil {
		return fmt.Errorf("start %s: %w", node, err)
	}
	n.running.Store(true)
	if err := f.net.apply(n); err != nil {
		return fmt.Errorf("start %s: re-apply network faults: %w", node, err)
	}
	return nil
}

// Kill SIGKILLs node's process and waits until the container has stopped;
// the container and its data stay.
func (f *dockerFleet) Kill(node string) error {
	n, err := f.node(node)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.running.Store(false)
	if _, err := runCmd(dockerCmdTimeout, nil, "docker", "kill", "--signal", "KILL", n.container); err != nil {
		return fmt.Errorf("kill %s: %w", node, err)
	}
	if _, err := runCmd(15*time.Second, nil, "docker", "wait", n.container); err != nil {
		return fmt.Errorf("%s did not stop after SIGKILL: %w", node, err)
	}
	return nil
}

// exec runs the fak binary in node's container with args (the image has
// nothing else) and returns its combined output.
func (f *dockerFleet) exec(node string, timeout time.Duration, args ...string) (string, error) {
	n, err := f.node(node)
	if err != nil {
		return "", err
	}
	return runCmd(timeout, nil, "docker", append([]string{"exec", n.container, "/fak"}, args...)...)
}

// Pause freezes the container's processes (cgroup freezer: like SIGSTOP,
// but not observable by the process).
func (f *dockerFleet) Pause(node string) error  { return f.docker(node, "pause") }
func (f *dockerFleet) Resume(node string) error { return f.docker(node, "unpause") }

// docker runs `docker verb <container>` for node.
func (f *dockerFleet) docker(node, verb string) error {
	n, err := f.node(node)
	if err != nil {
		return err
	}
	if _, err := runCmd(dockerCmdTimeout, nil, "docker", verb, n.container); err != nil {
		return fmt.Errorf("%s %s: %w", verb, node, err)
	}
	return nil
}

func (f *dockerFleet) Net() Network { return f.net }

func (f *dockerFleet) Describe() string {
	return fmt.Sprintf("%d fak containers (image %s) on docker network %s %s; network faults by %s",
		len(f.nodes), f.image, f.network, f.subnet, f.net.mechanism())
}

// Close saves the logs and removes the containers and the network, also
// after a partial start. It may be called more than once.
func (f *dockerFleet) Close() error {
	f.closeMu.Lock()
	defer f.closeMu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	if f.network == "" {
		return nil
	}
	if err := f.saveLogs(); err != nil {
		f.logger.Warn("saving container logs", "error", err)
	}
	var errs []error
	// By label rather than by the names we meant to create: that also
	// catches a container whose creation reported an error.
	ids, err := runCmd(dockerCmdTimeout, nil, "docker", "ps", "-aq", "--filter", "label="+dockerFleetLabel+"="+f.network)
	if err != nil {
		errs = append(errs, err)
	}
	if ids := strings.Fields(ids); len(ids) > 0 {
		if _, err := runCmd(dockerCmdTimeout, nil, "docker", append([]string{"rm", "-f", "-v"}, ids...)...); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := runCmd(dockerCmdTimeout, nil, "docker", "network", "rm", f.network); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
