package cluster

import (
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
)

// NodeMeta is what a node tells the fleet about itself through gossip.
type NodeMeta struct {
	APIAddr  string `json:"api"`
	RaftAddr string `json:"raft"`
	Expect   int    `json:"expect,omitempty"`
	Voter    bool   `json:"voter"`
	// Bootstrapped: this node already holds Raft state, so a cluster exists
	// and nobody may bootstrap a second one.
	Bootstrapped bool `json:"boot,omitempty"`
	// Leaving is announced before a graceful leave. memberlist reports a
	// leave and a failure alike to the event delegate, so this flag is how
	// peers tell "left" from "dead".
	Leaving bool `json:"leaving,omitempty"`
	// Caps is what the node offers to host execution epochs; the leader
	// commits it as the node's FSM record (DESIGN.md §8).
	Caps *Capabilities `json:"caps,omitempty"`
}

// Capabilities is a node's offer to host execution epochs: its labels,
// runtime adapters, providers, models, the account refs it can resolve
// (names only) and its capacity (max sessions, 0 = unlimited). Short JSON
// keys: gossip metadata is limited to memberlist.MetaMaxSize (512) bytes.
type Capabilities struct {
	Labels      map[string]string `json:"l,omitempty"` // marshalled sorted by key
	Adapters    []string          `json:"a,omitempty"`
	Providers   []string          `json:"p,omitempty"`
	Models      []string          `json:"m,omitempty"`
	AccountRefs []string          `json:"r,omitempty"`
	Capacity    uint32            `json:"c,omitempty"`
	// Approvals: runtimes that decide approvals themselves, "name=policy".
	Approvals []string `json:"ap,omitempty"`
	// RuleVersion: the highest FSM rule version the node's build applies
	// (fsm.RuleVersion); 0 from a build that did not advertise it.
	RuleVersion uint32 `json:"rv,omitempty"`
	// Meters: what meters each provider CLI or model runtime,
	// "name=gateway", "name=cli" or "name=runtime".
	Meters []string `json:"me,omitempty"`
}

// worstCaseAddr is the longest host:port a node may advertise (IPv6).
const worstCaseAddr = "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"

// CheckCapabilities reports whether caps fit in gossip metadata next to the
// longest addresses a node may advertise, so a node refuses a too-large
// configuration at start instead of gossiping no metadata at all.
func CheckCapabilities(caps Capabilities) error {
	meta := NodeMeta{APIAddr: worstCaseAddr, RaftAddr: worstCaseAddr, Expect: 99, Voter: true,
		Bootstrapped: true, Leaving: true, Caps: &caps}
	b, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	if len(b) > memberlist.MetaMaxSize {
		return fmt.Errorf("node capabilities take %d bytes of gossip metadata; the limit is %d (use fewer or shorter labels, models, providers, account refs)",
			len(b), memberlist.MetaMaxSize)
	}
	return nil
}

// SetCapabilities advertises the node's capabilities in its gossip
// metadata (call it once, after New and before joining).
func (c *Cluster) SetCapabilities(caps Capabilities) error {
	if err := CheckCapabilities(caps); err != nil {
		return err
	}
	g := c.gossip
	g.metaMu.Lock()
	g.meta.Caps = &caps
	g.metaMu.Unlock()
	return g.list.UpdateNode(5 * time.Second)
}

// Member statuses, as gossip reports them.
const (
	StatusAlive   = "alive"
	StatusSuspect = "suspect"
	StatusDead    = "dead"
	StatusLeft    = "left"
)

// Member is a gossip member with its metadata.
type Member struct {
	Name       string
	GossipAddr string
	Status     string
	Meta       NodeMeta
	// Since is when Status last changed (local clock; never enters the FSM).
	Since time.Time
}

// gossip owns memberlist and the member registry built from its events.
type gossip struct {
	logger hclog.Logger
	list   *memberlist.Memberlist
	name   string
	// addr is the advertised gossip address, captured at creation:
	// memberlist's LocalNode is not safe to read while it updates metadata.
	addr string

	metaMu sync.Mutex
	meta   NodeMeta

	mu      sync.Mutex
	members map[string]*Member

	// events wakes the reconcile and bootstrap loops on membership changes.
	events chan struct{}

	// hints receives the runner hints sent to this node (hint.go).
	hints atomic.Pointer[func(RunnerHint)]
}

func newGossip(cfg *Config, meta NodeMeta) (*gossip, error) {
	host, portStr, err := net.SplitHostPort(cfg.GossipAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", cfg.GossipAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: bad port", cfg.GossipAddr)
	}
	g := &gossip{
		logger:  cfg.Logger.Named("gossip"),
		name:    cfg.Name,
		meta:    meta,
		members: make(map[string]*Member),
		events:  make(chan struct{}, 1),
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Name
	mc.Logger = g.logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{host}, BindPort: port, Logger: mc.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("start gossip on %s: %w", cfg.GossipAddr, err)
	}
	port = nt.GetAutoBindPort()
	mc.Transport = &gossipTransport{NetTransport: nt, source: newSourceDialer(cfg.GossipAddr)}
	mc.BindAddr = host
	mc.BindPort = port
	mc.AdvertiseAddr = host
	mc.AdvertisePort = port
	if cfg.AdvertiseGossip != "" {
		ah, ap, err := net.SplitHostPort(cfg.AdvertiseGossip)
		p, perr := strconv.Atoi(ap)
		if err != nil || perr != nil || net.ParseIP(ah) == nil || p == 0 {
			nt.Shutdown()
			return nil, fmt.Errorf("gossip advertise address %q: want a specific ip:port", cfg.AdvertiseGossip)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = ah, p
	}
	mc.Delegate = g
	mc.Events = g
	if err := setGossipKeys(mc, cfg.GossipKeys); err != nil {
		nt.Shutdown()
		return nil, err
	}
	list, err := memberlist.Create(mc)
	if err != nil {
		nt.Shutdown()
		return nil, fmt.Errorf("start gossip on %s: %w", cfg.GossipAddr, err)
	}
	g.list = list
	n := list.LocalNode()
	g.addr = net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
	return g, nil
}

// Addr is the advertised gossip address (useful when bound to port 0).
func (g *gossip) Addr() string { return g.addr }

func (g *gossip) join(addrs []string) (int, error) {
	if len(addrs) == 0 {
		return 0, nil
	}
	return g.list.Join(addrs)
}

func (g *gossip) setBootstrapped() {
	g.metaMu.Lock()
	changed := !g.meta.Bootstrapped
	g.meta.Bootstrapped = true
	g.metaMu.Unlock()
	if changed {
		if err := g.list.UpdateNode(5 * time.Second); err != nil {
			g.logger.Warn("failed to broadcast metadata update", "error", err)
		}
	}
}

// Members returns every member ever seen, sorted by name.
func (g *gossip) Members() []Member {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Member, 0, len(g.members))
	for _, m := range g.members {
		mm := *m
		if m.Name == g.name {
			g.metaMu.Lock()
			mm.Meta = g.meta
			g.metaMu.Unlock()
		}
		out = append(out, mm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (g *gossip) member(name string) (Member, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.members[name]
	if !ok {
		return Member{}, false
	}
	return *m, true
}

// leave announces the intent (so peers record "left", not "dead"), then
// leaves memberlist.
func (g *gossip) leave(timeout time.Duration) error {
	g.metaMu.Lock()
	g.meta.Leaving = true
	g.metaMu.Unlock()
	if err := g.list.UpdateNode(timeout); err != nil {
		g.logger.Warn("failed to announce leave", "error", err)
	}
	return g.list.Leave(timeout)
}

func (g *gossip) shutdown() error { return g.list.Shutdown() }

// memberlist.Delegate

func (g *gossip) NodeMeta(limit int) []byte {
	g.metaMu.Lock()
	defer g.metaMu.Unlock()
	b, _ := json.Marshal(g.meta)
	if len(b) > limit {
		g.logger.Error("node metadata exceeds gossip limit", "bytes", len(b), "limit", limit)
		return nil
	}
	return b
}
func (g *gossip) NotifyMsg(msg []byte)                       { g.receive(msg) }
func (g *gossip) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (g *gossip) LocalState(join bool) []byte                { return nil }
func (g *gossip) MergeRemoteState(buf []byte, join bool)     {}

// memberlist.EventDelegate

func (g *gossip) NotifyJoin(n *memberlist.Node)   { g.record(n, StatusAlive) }
func (g *gossip) NotifyUpdate(n *memberlist.Node) { g.record(n, StatusAlive) }
func (g *gossip) NotifyLeave(n *memberlist.Node) {
	status := StatusDead
	g.mu.Lock()
	if m, ok := g.members[n.Name]; ok && m.Meta.Leaving {
		status = StatusLeft
	}
	g.mu.Unlock()
	g.record(n, status)
}

func (g *gossip) record(n *memberlist.Node, status string) {
	var meta NodeMeta
	if len(n.Meta) > 0 {
		if err := json.Unmarshal(n.Meta, &meta); err != nil {
			g.logger.Warn("ignoring member with unreadable metadata", "member", n.Name, "error", err)
			return
		}
	}
	g.mu.Lock()
	m, ok := g.members[n.Name]
	if !ok {
		m = &Member{Name: n.Name}
		g.members[n.Name] = m
	}
	if m.Status != status {
		m.Since = time.Now()
		g.logger.Info("member status", "member", n.Name, "status", status)
	}
	m.Status = status
	m.GossipAddr = net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
	if len(n.Meta) > 0 {
		leaving := m.Meta.Leaving
		m.Meta = meta
		// A rejoining node clears the flag with fresh metadata; the leave
		// notification itself carries the last metadata seen.
		if status != StatusAlive {
			m.Meta.Leaving = leaving || meta.Leaving
		}
	}
	g.mu.Unlock()
	select {
	case g.events <- struct{}{}:
	default:
	}
}

// gossipTransport is memberlist's TCP/UDP transport with stream dials made
// from the node's bind IP (UDP already leaves from the bound socket).
type gossipTransport struct {
	*memberlist.NetTransport
	source sourceDialer
}

func (t *gossipTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *gossipTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.source.dialer(a.Addr, timeout).Dial("tcp", a.Addr)
}

// setGossipKeys turns on gossip encryption: keys[0] encrypts, every key
// decrypts, and unencrypted messages are refused both ways, so a node
// without a key of the ring can neither join nor read the fleet's gossip.
func setGossipKeys(mc *memberlist.Config, keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	ring, err := memberlist.NewKeyring(keys, keys[0])
	if err != nil {
		return fmt.Errorf("gossip keys: %w", err)
	}
	mc.Keyring = ring
	mc.GossipVerifyIncoming = true
	mc.GossipVerifyOutgoing = true
	return nil
}
