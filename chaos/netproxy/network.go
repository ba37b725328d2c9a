package netproxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// link is one direction between two nodes. An empty from or to is a
// source or destination that is not a registered node; such links are never
// faulted.
type link struct{ from, to string }

func (l link) faultable() bool { return l.from != "" && l.to != "" && l.from != l.to }

// Network is the fault table shared by a set of proxies, and the owner of
// those proxies. Its methods are safe for concurrent use; fault changes take
// effect immediately on existing and new traffic and never wait on traffic.
type Network struct {
	log    hclog.Logger
	ctx    context.Context // done once Close is called
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine started by the proxies

	// udpIdle is how long an unused UDP NAT entry lives.
	udpIdle time.Duration

	mu      sync.Mutex
	closed  bool
	nodes   map[string]net.IP // name -> source IP
	byIP    map[string]string // ip.String() -> name
	blocked map[link]bool
	latency map[link]time.Duration
	changed chan struct{} // closed and replaced on every fault change
	closers map[io.Closer]struct{}
}

// New returns an empty Network with no nodes, proxies or faults. A nil
// logger discards logs.
func New(logger hclog.Logger) *Network {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Network{
		log:     logger,
		ctx:     ctx,
		cancel:  cancel,
		udpIdle: 2 * time.Minute,
		nodes:   map[string]net.IP{},
		byIP:    map[string]string{},
		blocked: map[link]bool{},
		latency: map[link]time.Duration{},
		changed: make(chan struct{}),
		closers: map[io.Closer]struct{}{},
	}
}

// AddNode registers a node's name and the source IP its outgoing connections
// and packets come from. Registering a name again replaces its IP.
func (n *Network) AddNode(name string, ip net.IP) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if old, ok := n.nodes[name]; ok {
		delete(n.byIP, old.String())
	}
	n.nodes[name] = ip
	n.byIP[ip.String()] = name
	n.log.Debug("node added", "node", name, "ip", ip)
}

// nodeByAddr returns the node whose IP is addr's IP, or "" and nil.
func (n *Network) nodeByAddr(addr net.Addr) (string, net.IP) {
	var ip net.IP
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip = a.IP
	case *net.UDPAddr:
		ip = a.IP
	default:
		return "", nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	name, ok := n.byIP[ip.String()]
	if !ok {
		return "", nil
	}
	return name, n.nodes[name]
}

// Block stops traffic from -> to (one way) until Heal or a Partition.
func (n *Network) Block(from, to string) {
	n.update(func() {
		if l := (link{from, to}); l.faultable() {
			n.blocked[l] = true
		}
	}, "block", "from", from, "to", to)
}

// Partition splits the named nodes into groups that cannot reach each other
// in either direction, replacing every current block (latencies are kept).
// Nodes named in no group keep reaching everyone.
func (n *Network) Partition(groups ...[]string) {
	n.update(func() {
		clear(n.blocked)
		for i, g := range groups {
			for j, h := range groups {
				if i == j {
					continue
				}
				for _, a := range g {
					for _, b := range h {
						if l := (link{a, b}); l.faultable() {
							n.blocked[l] = true
						}
					}
				}
			}
		}
	}, "partition", "groups", fmt.Sprint(groups))
}

// Isolate blocks every registered node <-> name, both ways, in addition to
// current blocks.
func (n *Network) Isolate(name string) {
	n.update(func() {
		for other := range n.nodes {
			if other != name {
				n.blocked[link{name, other}] = true
				n.blocked[link{other, name}] = true
			}
		}
	}, "isolate", "node", name)
}

// SetLatency sets the one-way delay added to traffic from -> to; 0 removes it.
func (n *Network) SetLatency(from, to string, d time.Duration) {
	n.update(func() {
		l := link{from, to}
		switch {
		case !l.faultable():
		case d > 0:
			n.latency[l] = d
		default:
			delete(n.latency, l)
		}
	}, "latency", "from", from, "to", to, "delay", d)
}

// Heal removes every block and every latency.
func (n *Network) Heal() {
	n.update(func() {
		clear(n.blocked)
		clear(n.latency)
	}, "heal")
}

// update applies change under the lock, wakes every waiting pump and logs.
func (n *Network) update(change func(), what string, kv ...any) {
	n.mu.Lock()
	change()
	close(n.changed)
	n.changed = make(chan struct{})
	faults := n.faultsLocked()
	n.mu.Unlock()
	n.log.Info("network fault change: "+what, append(kv, "faults", faults)...)
}

// Faults summarises the current faults, sorted, e.g.
// "n1-/->n2 n1~50ms~>n3", or "none".
func (n *Network) Faults() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.faultsLocked()
}

func (n *Network) faultsLocked() string {
	var out []string
	for l := range n.blocked {
		out = append(out, l.from+"-/->"+l.to)
	}
	for l, d := range n.latency {
		out = append(out, l.from+"~"+d.String()+"~>"+l.to)
	}
	if len(out) == 0 {
		return "none"
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// state returns whether l is blocked, its latency, and a channel closed on
// the next fault change. ok is false once the Network is closed.
func (n *Network) state(l link) (blocked bool, delay time.Duration, changed <-chan struct{}, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false, 0, nil, false
	}
	return n.blocked[l], n.latency[l], n.changed, true
}

// waitOpen waits until l is not blocked. It returns false if done or the
// Network closes first. An open link returns true without looking at done.
func (n *Network) waitOpen(l link, done <-chan struct{}) bool {
	for {
		blocked, _, changed, ok := n.state(l)
		if !ok {
			return false
		}
		if !blocked {
			return true
		}
		select {
		case <-changed:
		case <-done:
			return false
		case <-n.ctx.Done():
			return false
		}
	}
}

// waitDue waits until l is open and stamp plus l's current latency has
// passed, so that a block or latency change while waiting is honoured. It
// returns false if done or the Network closes first.
func (n *Network) waitDue(l link, stamp time.Time, done <-chan struct{}) bool {
	for {
		blocked, delay, changed, ok := n.state(l)
		if !ok {
			return false
		}
		var timer *time.Timer
		var fire <-chan time.Time
		if !blocked {
			wait := time.Until(stamp.Add(delay))
			if wait <= 0 {
				return true
			}
			timer = time.NewTimer(wait)
			fire = timer.C
		}
		select {
		case <-changed:
		case <-fire:
		case <-done:
			return false
		case <-n.ctx.Done():
			return false
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// track registers c to be closed by Close. It returns false, having closed c,
// if the Network is already closed.
func (n *Network) track(c io.Closer) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		c.Close()
		return false
	}
	n.closers[c] = struct{}{}
	return true
}

func (n *Network) untrack(c io.Closer) {
	n.mu.Lock()
	delete(n.closers, c)
	n.mu.Unlock()
}

// goroutine runs f in a goroutine that Close waits for. It returns false,
// running nothing, if the Network is closed.
func (n *Network) goroutine(f func()) bool {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return false
	}
	n.wg.Add(1) // under mu, so never concurrent with Close's Wait at zero
	n.mu.Unlock()
	go func() {
		defer n.wg.Done()
		f()
	}()
	return true
}

// Close stops every proxy, closes every proxied connection and NAT socket,
// and waits for all their goroutines. Faults can still be set afterwards but
// nothing is proxied; creating a proxy fails.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	closers := n.closers
	n.closers = map[io.Closer]struct{}{}
	n.mu.Unlock()
	n.cancel()
	for c := range closers {
		c.Close()
	}
	n.wg.Wait()
	n.log.Debug("network closed")
	return nil
}
