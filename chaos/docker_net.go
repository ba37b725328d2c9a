package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// dockerNet injects faults between containers. It keeps the faults in
// force (which directed links drop, which are delayed) and syncs each
// container's network namespace to them: an iptables INPUT rule per
// dropped link in the receiver, a netem qdisc per delayed link in the
// sender. Partition replaces the drops (latencies stay), Block adds one,
// Heal clears all, as with the process fleet's proxy.
type dockerNet struct {
	f *dockerFleet

	mu sync.Mutex
	// nsenter reports that iptables works in the containers' network
	// namespaces; without it partitions use `docker network disconnect`.
	nsenter bool
	netem   bool // tc netem works there too (latency)
	drop    map[link]bool
	delay   map[link]time.Duration
	cut     map[string]bool // disconnected from the docker network (fallback)
}

// link is a directed pair of nodes.
type link struct{ from, to string }

// probe finds out which mechanisms work: iptables in n1's namespace (a
// rule for a TEST-NET address, then none), then a netem qdisc there.
func (d *dockerNet) probe() {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.f.nodes[0]
	test := net.IPv4(192, 0, 2, 1)
	pid, err := containerPID(n.container)
	if err == nil {
		if err = setDrops(pid, []net.IP{test}); err == nil {
			err = setDrops(pid, nil)
		}
	}
	d.nsenter = err == nil
	if err != nil {
		d.f.logger.Warn("iptables in the containers' network namespaces does not work; partitions fall back to docker network disconnect, one-way blocks and latency are off", "error", err)
		return
	}
	if err = setDelays(pid, map[string]time.Duration{test.String(): time.Millisecond}); err == nil {
		err = setDelays(pid, nil)
	}
	d.netem = err == nil
	if err != nil {
		d.f.logger.Warn("tc netem does not work in the containers' network namespaces; latency is off", "error", err)
	}
}

func (d *dockerNet) mechanism() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.nsenter && d.netem:
		return "iptables and tc netem in each container's netns"
	case d.nsenter:
		return "iptables in each container's netns (no netem: no latency)"
	}
	return "docker network disconnect (partitions isolating nodes only)"
}

func (d *dockerNet) Supports(kind NemesisKind) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch kind {
	case OneWay:
		return d.nsenter
	case Latency:
		return d.netem
	}
	// Every partition the nemesis makes isolates one node, which even
	// the disconnect fallback can do.
	return true
}

func (d *dockerNet) Partition(groups ...[]string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, g := range groups {
		for _, name := range g {
			if _, err := d.f.node(name); err != nil {
				return err
			}
		}
	}
	clear(d.drop)
	for i, g := range groups {
		for j, h := range groups {
			for _, a := range g {
				for _, b := range h {
					if i != j && a != b {
						d.drop[link{a, b}] = true
					}
				}
			}
		}
	}
	if !d.nsenter {
		return d.disconnectForDrops()
	}
	return d.applyAll()
}

func (d *dockerNet) Block(from, to string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.nsenter {
		return errors.New("one-way blocks need iptables in the containers' network namespaces")
	}
	if err := d.known(from, to); err != nil {
		return err
	}
	d.drop[link{from, to}] = true
	return d.applyAll()
}

func (d *dockerNet) SetLatency(from, to string, delay time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.netem {
		return errors.New("latency needs tc netem in the containers' network namespaces")
	}
	if err := d.known(from, to); err != nil {
		return err
	}
	if delay > 0 {
		d.delay[link{from, to}] = delay
	} else {
		delete(d.delay, link{from, to})
	}
	return d.applyAll()
}

// Heal removes every fault. It is idempotent: what failed to heal stays
// recorded and is retried by the next Heal.
func (d *dockerNet) Heal() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.drop)
	clear(d.delay)
	if !d.nsenter {
		return d.disconnectForDrops()
	}
	return d.applyAll()
}

func (d *dockerNet) known(nodes ...string) error {
	for _, name := range nodes {
		if _, err := d.f.node(name); err != nil {
			return err
		}
	}
	return nil
}

// apply syncs n's network namespace to the faults in force (Start).
func (d *dockerNet) apply(n *dockerNode) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.nsenter {
		return nil // a disconnect outlives restarts by itself
	}
	return d.applyNode(n)
}

func (d *dockerNet) applyAll() error {
	var errs []error
	for _, n := range d.f.nodes {
		errs = append(errs, d.applyNode(n))
	}
	return errors.Join(errs...)
}

// applyNode installs n's inbound drops and outbound delays. A stopped
// container has no namespace to fix; Start applies them.
func (d *dockerNet) applyNode(n *dockerNode) error {
	pid, err := containerPID(n.container)
	if err != nil || pid == 0 {
		return err
	}
	var drops []net.IP
	delays := map[string]time.Duration{}
	for _, o := range d.f.nodes {
		if d.drop[link{o.name, n.name}] {
			drops = append(drops, o.ip)
		}
		if dl := d.delay[link{n.name, o.name}]; dl > 0 {
			delays[o.ip.String()] = dl
		}
	}
	if err := setDrops(pid, drops); err != nil {
		return fmt.Errorf("%s: %w", n.name, err)
	}
	if d.netem {
		if err := setDelays(pid, delays); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
	}
	return nil
}

// containerPID is the host PID of the container's main process, 0 when it
// is not running.
func containerPID(container string) (int, error) {
	out, err := runCmd(dockerCmdTimeout, nil, "docker", "inspect", "--format", "{{.State.Pid}}", container)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

// setDrops makes the filter table of pid's network namespace drop every
// packet from the given sources, and nothing else. The filter table in a
// container's namespace is ours alone (Docker's DNS rules are in nat), so
// iptables-restore replaces it atomically. Dropping on input rather than
// output keeps the loss silent: a sender sees no EPERM, only timeouts.
func setDrops(pid int, from []net.IP) error {
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for _, ip := range from {
		fmt.Fprintf(&b, "-A INPUT -s %s/32 -j DROP\n", ip)
	}
	b.WriteString("COMMIT\n")
	_, err := runCmd(dockerCmdTimeout, strings.NewReader(b.String()),
		"nsenter", "-t", strconv.Itoa(pid), "-n", "iptables-restore", "-w", "10")
	return err
}

// setDelays replaces the root qdisc of the container's interface in pid's
// network namespace: none when delays is empty, else a prio qdisc whose
// first band (all other traffic, the harness's included) is undelayed and
// which sends packets for each delayed destination IP, by a u32 filter, to
// a band of its own with a netem qdisc.
func setDelays(pid int, delays map[string]time.Duration) error {
	dev, err := netDevice(pid)
	if err != nil {
		return err
	}
	tc := func(stdin io.Reader, args ...string) error {
		_, err := runCmd(dockerCmdTimeout, stdin, "nsenter", append([]string{"-t", strconv.Itoa(pid), "-n", "tc"}, args...)...)
		return err
	}
	// Deleting a root qdisc that is not there fails; that is fine.
	_ = tc(nil, "qdisc", "del", "dev", dev, "root")
	if len(delays) == 0 {
		return nil
	}
	if len(delays) > 15 {
		return errors.New("prio qdisc has at most 16 bands")
	}
	dsts := make([]string, 0, len(delays))
	for ip := range delays {
		dsts = append(dsts, ip)
	}
	slices.Sort(dsts)
	var b strings.Builder
	fmt.Fprintf(&b, "qdisc add dev %s root handle 1: prio bands %d priomap%s\n", dev, len(dsts)+1, strings.Repeat(" 0", 16))
	for i, ip := range dsts {
		band := i + 2 // band minors are hex, 1:1 is the undelayed one
		fmt.Fprintf(&b, "qdisc add dev %s parent 1:%x handle %x: netem delay %dus\n", dev, band, 0x10+band, delays[ip].Microseconds())
		fmt.Fprintf(&b, "filter add dev %s parent 1: protocol ip prio 1 u32 match ip dst %s/32 flowid 1:%x\n", dev, ip, band)
	}
	if err := tc(strings.NewReader(b.String()), "-batch", "-"); err != nil {
		_ = tc(nil, "qdisc", "del", "dev", dev, "root")
		return err
	}
	return nil
}

// netDevice names the container's one interface besides lo: eth0 at
// first, but a network reconnect brings it back as eth1.
func netDevice(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/dev", pid))
	if err != nil {
		return "", err
	}
	var devs []string
	for _, line := range strings.Split(string(b), "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok {
			if name = strings.TrimSpace(name); name != "lo" {
				devs = append(devs, name)
			}
		}
	}
	if len(devs) != 1 {
		return "", fmt.Errorf("want one network interface in pid %d's namespace, have %v", pid, devs)
	}
	return devs[0], nil
}

// disconnectForDrops is the fallback for hosts where the harness cannot
// enter the containers' namespaces: it realizes the drops in force by
// disconnecting nodes from the docker network, which works only when the
// drops are exactly "every link of some set of nodes" (a partition
// isolating single nodes). Reconnecting restores each node's fixed IP.
func (d *dockerNet) disconnectForDrops() error {
	want := map[string]bool{}
	for _, n := range d.f.nodes {
		if d.isolated(n.name) {
			want[n.name] = true
		}
	}
	for l := range d.drop {
		if !want[l.from] && !want[l.to] {
			return fmt.Errorf("docker network disconnect can only isolate whole nodes, not drop %s -> %s", l.from, l.to)
		}
	}
	var errs []error
	for _, n := range d.f.nodes {
		switch {
		case want[n.name] && !d.cut[n.name]:
			if _, err := runCmd(dockerCmdTimeout, nil, "docker", "network", "disconnect", "--force", d.f.network, n.container); err != nil {
				errs = append(errs, err)
				continue
			}
			d.cut[n.name] = true
		case !want[n.name] && d.cut[n.name]:
			if err := d.reconnect(n); err != nil {
				errs = append(errs, err)
				continue
			}
			delete(d.cut, n.name)
		}
	}
	return errors.Join(errs...)
}

// isolated reports whether every link to and from node is dropped.
func (d *dockerNet) isolated(node string) bool {
	for _, o := range d.f.nodes {
		if o.name != node && (!d.drop[link{node, o.name}] || !d.drop[link{o.name, node}]) {
			return false
		}
	}
	return true
}

// reconnect attaches n to the network again with its IP. A node started
// while disconnected has died at once (its addresses did not exist), so it
// is started again if the harness wants it running.
func (d *dockerNet) reconnect(n *dockerNode) error {
	_, err := runCmd(dockerCmdTimeout, nil, "docker", "network", "connect", "--ip", n.ip.String(), d.f.network, n.container)
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		return err
	}
	if !n.running.Load() {
		return nil
	}
	out, err := runCmd(dockerCmdTimeout, nil, "docker", "inspect", "--format", "{{.State.Running}}", n.container)
	if err != nil || strings.TrimSpace(out) == "true" {
		return err
	}
	_, err = runCmd(dockerCmdTimeout, nil, "docker", "start", n.container)
	return err
}

// runCmd runs name with args (and stdin) under timeout and returns its
// stdout; the error carries the command line and its stderr.
func runCmd(timeout time.Duration, stdin io.Reader, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("timed out after %s", timeout)
		}
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
