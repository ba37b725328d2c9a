# /etc/fak/fak.hcl: one server of a three-node production fleet, read by
# `fak agent --config /etc/fak/fak.hcl` (see deploy/fak.service).
#
# Every key is an agent flag with '-' written as '_' (`fak agent -h` lists
# them all). Strings, numbers and bools set a flag once; a list sets a
# repeatable flag once per element; an object sets key=value flags (label)
# once per entry. Flags given on the command line win over this file. Write
# absolute paths: the agent runs in / under systemd.
#
# Copy it to each node, then change name and the addresses (the node's own
# private IP) and join (the other nodes).

# Stable identity in Raft and gossip: never reuse a name for a new machine.
name = "fak-1"

# The Raft log, snapshots and state; systemd's StateDirectory=fak makes it,
# owned by the fak user.
data_dir = "/var/lib/fak"

# Bind to the node's private address; peers reach it here (use the
# advertise_* keys when they must use another address, e.g. behind NAT).
api_addr    = "10.0.0.1:7401"
raft_addr   = "10.0.0.1:7501"
gossip_addr = "10.0.0.1:7601"

# The first start forms a new cluster once three servers see each other;
# later starts rejoin from the data in data_dir.
bootstrap_expect = 3
join             = ["10.0.0.2:7601", "10.0.0.3:7601"]

# API bearer tokens, one "<role> <token>" per line (operator, agent, read).
# Mode 0640, owner root, group fak.
token_file = "/etc/fak/tokens"

# Gossip encryption: make a key with `fak keygen`. Every node needs the same
# keys; the first encrypts and all of them decrypt. To rotate without
# downtime: add the new key second on every node (restart one by one), then
# move it first on every node, then drop the old one (README, "Secure it").
gossip_key = ["REPLACE-WITH-THE-OUTPUT-OF-fak-keygen"]

# Mutual TLS for Raft and the API: `fak tls init` makes a CA and one
# certificate per node. All three, or none.
tls_ca   = "/etc/fak/tls/ca.pem"
tls_cert = "/etc/fak/tls/fak-1.pem"
tls_key  = "/etc/fak/tls/fak-1-key.pem"

# Placement: what this node offers to sessions (all optional).
label    = { zone = "eu-west-1a" }
capacity = 50
# provider    = ["anthropic"]
# model       = ["claude-sonnet-4"]
# account_ref = ["team-a"]

# The metering gateway every node serves at /gateway/<provider>/… forwards
# model calls with an account of the provider and charges them to the
# session (X-Trace-Id) or the guarded launch's default session, priced by
# the price blocks (per million tokens; a prefix ends in '*'). Keys stay on
# the node: the environment variable (systemd EnvironmentFile=) or a file.
account "anthropic-main" {
  provider    = "anthropic"
  upstream    = "https://api.anthropic.com"
  api_key_env = "ANTHROPIC_API_KEY"
}
account "openai-main" {
  provider     = "openai"
  api_key_file = "/etc/fak/openai.key"
}
account "gemini-main" {
  provider     = "gemini"
  api_key_env  = "GEMINI_API_KEY"
  pass_through = true # a caller's own key, when it brings one (with fak's token in X-Fak-Token)
}
price "claude-sonnet-4*" {
  input_per_mtok       = 3
  output_per_mtok      = 15
  cache_read_per_mtok  = 0.3
  cache_write_per_mtok = 3.75
}
price "gpt-4.1*" {
  input_per_mtok      = 2
  output_per_mtok     = 8
  cache_read_per_mtok = 0.5
}
price "gemini-2.5-pro*" {
  input_per_mtok  = 1.25
  output_per_mtok = 10
}

# Provider CLIs as session runtimes (docs/guard.md): install the CLI on the
# node, then name it here. Through the gateway by default (an account of
# the provider above); policy says who decides tool approvals.
# runtime "claude" {
#   adapter = "claude"
#   command = ["/usr/local/bin/claude"]
#   policy  = "ask"             # approvals go to fak's clients
# }
# runtime "codex" {
#   adapter = "codex"
#   policy  = "workspace-write" # the sandbox decides
# }

# Recover a dead node's sessions elsewhere after this long (a duration).
recover_after = "2m"

# Purge sessions stopped longer than this (days or a duration); each purge is
# in the audit log (fakctl audit log). Unset or "0": keep them for good.
# retain_stopped = "30d"

# How fast a snapshot is copied while the node serves (bytes a second), so
# writes are not held up behind it; the one before a clean shutdown is not
# paced. "0": as fast as it can.
snapshot_rate = "16MiB"

# The Go memory (heap, stacks) the node keeps near while its live heap is
# small; above two thirds of it the limit follows 1.5× the live heap. "0"
# lifts it; GOMEMLIMIT in the environment wins.
memory_target = "56MiB"

# SIGTERM (systemctl stop) stops the node without leaving the cluster, so a
# restarted fleet keeps its Raft configuration. Set true on a node you are
# retiring, or run `fakctl operator raft remove-peer` after it is gone.
leave_on_terminate = false

# journald keeps the lines; JSON is easier to ship elsewhere.
log_level = "info"
log_json  = true
