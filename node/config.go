package node

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fak-dev/fak/api"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/node/runner/proc"
)

// Config is everything one `fak agent` needs.
type Config struct {
	Name       string
	DataDir    string
	APIAddr    string
	RaftAddr   string
	GossipAddr string
	// Advertise*: the addresses peers reach this node at, when they differ
	// from the bound ones (NAT, containers, a proxy). Empty: the bound one.
	AdvertiseAPI    string
	AdvertiseRaft   string
	AdvertiseGossip string

	BootstrapExpect int
	Join            []string
	Voter           bool

	// GossipKeys (base64 AES keys, 16/24/32 bytes) encrypt gossip: the
	// first encrypts, all decrypt (rotation). Empty: gossip in the clear.
	GossipKeys []string
	// TLSCert, TLSKey, TLSCA: the node's certificate, key and the fleet's
	// CA (PEM files). All three turn on mutual TLS for Raft and the API;
	// none leaves both plaintext.
	TLSCert, TLSKey, TLSCA string

	// Tokens accepted on the API, with their roles (the tokens file);
	// empty disables auth (tests only). With auth on, one must be an
	// operator token: the node's own runner writes with it.
	Tokens []api.Token
	// TokenFile is where Tokens were read from: a sandboxed runtime must
	// not see it.
	TokenFile     string
	MaxEventBytes int
	// MaxCallsPerCaller bounds one caller's unary calls in flight (0: the
	// API's default; negative: no limit).
	MaxCallsPerCaller int
	// APILimits bound the API's connections and request bodies (zero
	// fields: the API's defaults, api.Limits).
	APILimits api.Limits

	// Runtimes are the runtime blocks of the agent's config (besides the
	// built-in echo), Accounts the account blocks that resolve their
	// credentials on this node.
	Runtimes []RuntimeConfig
	Accounts []AccountConfig
	// Prices are the price blocks: what the gateway charges a model's
	// tokens.
	Prices []PriceConfig
	// runtimeKey is what this node's runtimes call its gateway with, at
	// gatewayURL (this node's API on loopback).
	runtimeKey, gatewayURL string
	// turnGroups records the process groups of the node's turns
	// (<data-dir>/turns), so none outlives the node.
	turnGroups *proc.Groups

	// EchoTurn is the length of a turn of the built-in echo adapter: 0 is
	// the default (1s), a negative value runs turns without pauses.
	EchoTurn time.Duration
	// LeaseTTL and AttachmentTTL override the API's input-lease and
	// attachment lifetimes (0: the API defaults). Tests shorten them.
	LeaseTTL      time.Duration
	AttachmentTTL time.Duration

	// What the node offers to host execution epochs (DESIGN.md §8),
	// advertised in gossip and committed as its node record by the leader:
	// labels (policy constraints match them), providers, models, the
	// account refs it can resolve (names only) and its capacity (max
	// sessions placed on it; 0 = unlimited). The runtime adapters are the
	// runner's own.
	Labels      map[string]string
	Providers   []string
	Models      []string
	AccountRefs []string
	Capacity    uint32
	// MaxWorkspaceBytes bounds a session workspace this node snapshots or
	// restores in a move (0: unlimited; DefaultMaxWorkspaceBytes for the
	// agent).
	MaxWorkspaceBytes int64

	// RecoverAfter: a node dead in gossip this long has its sessions
	// recovered onto admitted nodes (0: DefaultRecoverAfter).
	RecoverAfter time.Duration
	// RetainStopped: the leader purges sessions stopped longer than this
	// (retention.go); 0 keeps them for good.
	RetainStopped time.Duration

	DeadServerGrace   time.Duration
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// SnapshotLogFraction amortises snapshots (cluster.Config); 0 keeps
	// Raft's every-SnapshotThreshold-entries rule.
	SnapshotLogFraction float64
	// SnapshotRate paces a snapshot's copy while the node serves, in
	// bytes a second (cluster.Config); 0: unpaced.
	SnapshotRate int64

	Logger hclog.Logger

	// OnStorageFull is called when a write of the node's storage fails
	// for a full disk, after the one line saying so is logged
	// (cluster.Config): the agent exits there. Nil: the node stays up,
	// never ready.
	OnStorageFull func(*cluster.StorageError)
	// StoreFault injects storage faults in tests (cluster.Config).
	StoreFault func(what string) error
}

// Validate checks the configuration before anything starts.
func (c *Config) Validate() error {
	if c.Name == "" {
		return errors.New("--name is required")
	}
	if c.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	for flag, addr := range map[string]string{"--api-addr": c.APIAddr, "--raft-addr": c.RaftAddr, "--gossip-addr": c.GossipAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%s %q: want host:port", flag, addr)
		}
	}
	for flag, addr := range map[string]string{"--advertise-api": c.AdvertiseAPI, "--advertise-raft": c.AdvertiseRaft, "--advertise-gossip": c.AdvertiseGossip} {
		if addr == "" {
			continue
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil || port == "0" || net.ParseIP(host) == nil || net.ParseIP(host).IsUnspecified() {
			return fmt.Errorf("%s %q: want a specific ip:port", flag, addr)
		}
	}
	if err := c.validateSecurity(); err != nil {
		return err
	}
	if _, ok := api.OperatorSecret(c.Tokens); len(c.Tokens) > 0 && !ok {
		return errors.New("the token file holds no operator token, and the node's own runner writes with one: add a line `operator <token>` (or a bare `<token>`)")
	}
	if c.SnapshotRate < 0 {
		return errors.New("--snapshot-rate must not be negative")
	}
	if c.SnapshotLogFraction < 0 {
		return errors.New("--snapshot-log-fraction must not be negative")
	}
	if c.RetainStopped < 0 {
		return errors.New("--retain-stopped must not be negative (0 keeps stopped sessions for good)")
	}
	if c.RecoverAfter < 0 {
		return errors.New("--recover-after must be >= 0")
	}
	if err := c.checkRuntimes(); err != nil {
		return err
	}
	if err := c.checkCapabilities(); err != nil {
		return err
	}
	if c.BootstrapExpect < 0 {
		return errors.New("--bootstrap-expect must be >= 0")
	}
	if c.BootstrapExpect > 0 && !c.Voter {
		return errors.New("--bootstrap-expect needs a voter (--voter=false cannot bootstrap)")
	}
	return nil
}

// ownToken is what the node calls APIs with — its runner's writes to its
// own, a destination's reads of a source's workspace, a leave: the first
// operator token ("" with auth off).
func (c *Config) ownToken() string {
	secret, _ := api.OperatorSecret(c.Tokens)
	return secret
}

// DefaultMaxWorkspaceBytes is the agent's max_workspace_bytes: 1 GiB of
// files moves in seconds on a LAN, and bounds what a move can be asked to
// carry.
const DefaultMaxWorkspaceBytes = 1 << 30
