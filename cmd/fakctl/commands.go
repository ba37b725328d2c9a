package main

import (
	"context"
	"flag"
	"strings"
)

// runFunc runs a command once its flags are parsed; args are the positional
// arguments, already checked against the command's argument names.
type runFunc func(ctx context.Context, c *cli, args []string) error

// command is one "fakctl <noun> <verb>".
type command struct {
	noun, verb string
	args       []string // names of the required positional arguments
	flags      string   // flag synopsis for the usage line
	synopsis   string   // one line for the command listing
	help       string   // longer description for the command's help

	// setup declares the command's flags on fs and returns the function that
	// runs the command with them, so help can list the flags without running.
	setup func(fs *flag.FlagSet) runFunc
	// output, when set, checks -o for a command that writes formats of its
	// own (else -o is table or json).
	output func(string) error
}

// path is "noun verb", or just "noun" for a noun that is itself a command.
func (cmd *command) path() string { return strings.TrimSpace(cmd.noun + " " + cmd.verb) }

// commands lists every command, in the order the usage shows them.
var commands = []*command{
	{
		noun: "cluster", verb: "members",
		synopsis: "List the gossip members of the fleet",
		help:     "Lists every member the serving node knows through gossip, with its status and addresses.",
		setup:    clusterMembersCommand,
	},
	{
		noun: "cluster", verb: "peers",
		synopsis: "List the Raft peers",
		help:     "Lists the servers in the Raft configuration and which one leads.",
		setup:    clusterPeersCommand,
	},
	{
		noun: "cluster", verb: "status",
		flags:    "[--all=false]",
		synopsis: "Show the Raft status of every node",
		help:     "Shows the Raft state and indexes of every alive member, or only of the serving node with --all=false.",
		setup:    clusterStatusCommand,
	},
	{
		noun: "cluster", verb: "leave",
		synopsis: "Make the node at --addr leave the fleet",
		help:     "Asks the node at --addr to leave the fleet gracefully: it leaves the Raft configuration and gossip, then shuts down.",
		setup:    clusterLeaveCommand,
	},
	{
		noun: "fleet", verb: "",
		flags:    "[--stale] [--all] [--limit N] [--watch [--interval 2s]]",
		synopsis: "Show the whole fleet: nodes, Raft roles and lag, sessions",
		help: "Shows every node (gossip status, Raft role, applied index and how far it trails the leader's commit index, " +
			"sessions hosted out of its capacity, draining, labels) and every active session (title, state, node, epoch, " +
			"input lease holder, open move, journal head, remaining budget), with a summary line: the leader and the counts. " +
			"--all includes stopped sessions; every page of --limit sessions is fetched, up to 10000. " +
			"With --watch it refreshes every --interval until interrupted (in place on a terminal); a failed read is shown " +
			"and the watch goes on. -o json prints the response (one per line with --watch).",
		setup: fleetCommand,
	},
	{
		noun: "session", verb: "create",
		flags: "--title T [--objective O] [--node NAME] [--adapter NAME] [--model M] [--provider P] [--account-ref NAME] " +
			"[--max-turns N] [--max-output-tokens N] [--max-queries N] [--max-spend AMOUNT] [--max-tool-calls N] " +
			"[--context-cap TOKENS] [--priority P] [--pace P] [--qa-envelope E] [--recover auto|manual] [--request-id R]",
		synopsis: "Create a session",
		help: "Creates a session and prints its ID. Retrying with the same --request-id returns the same session.\n\n" +
			"  The first execution epoch is placed on --node (default: the node at --addr), whose runner runs the agent " +
			"with the --adapter runtime adapter (default echo, a deterministic agent for tests and demos); " +
			"--model, --provider and --account-ref complete the placement. The journal starts with session.created " +
			"and epoch.changed, so a new session's head is 2.\n\n" +
			"  The session gets a new budget envelope, which every session cleared, renewed or forked from it shares " +
			"(no reset buys a new allowance): --max-turns, --max-output-tokens, --max-queries, --max-spend " +
			"(a decimal amount, counted in millionths) and --max-tool-calls limit it; --context-cap limits each " +
			"session's context window. Limits not given take the node's defaults (unlimited unless configured).",
		setup: sessionCreateCommand,
	},
	{
		noun: "session", verb: "list",
		flags:    "[--stale]",
		synopsis: "List sessions",
		help:     "Lists every session with its state, execution epoch and compute node, the input lease holder and the journal head.",
		setup:    sessionListCommand,
	},
	{
		noun: "session", verb: "describe",
		args:     []string{"ID"},
		flags:    "[--attachment ID] [--stale]",
		synopsis: "Show a session's descriptor",
		help: "Shows the session descriptor: state, objective, execution epoch and placement, journal head, " +
			"pending interaction (queued inputs, running turn, pending approval), the input lease holder and its expiry, " +
			"the context axis, the last reset boundary, the provider binding and the lineage (parent, boundary source, fork address), " +
			"the budget envelope the lineage shares (limits, used and remaining per axis, elapsed time, sessions, refusals), " +
			"the attachments with their presence, and the capability set: every control, available or not with the " +
			"reason and a handoff. With --attachment the controls are those that attachment may use now.",
		setup: sessionDescribeCommand,
	},
	{
		noun: "session", verb: "discover",
		args:     []string{"ID"},
		synopsis: "Show where a session runs and which nodes serve it",
		help: "Shows the session's current execution epoch, its compute node and the API endpoints that serve it " +
			"(every node serves every session; alive nodes first, the compute node first among them).",
		setup: sessionDiscoverCommand,
	},
	{
		noun: "session", verb: "append",
		args:     []string{"ID"},
		flags:    "--text T [--kind K] [--data JSON] [--expected-seq N] [--request-id R]",
		synopsis: "Append an annotation event to a session",
		help: "Appends one event to a session's journal and prints its sequence number. " +
			"With --expected-seq the append fails with SEQ_MISMATCH unless the journal head is N.\n\n" +
			"  Clients may append only these kinds: " + strings.Join(appendableKinds, ", ") + " (default " + appendableKinds[0] + "). " +
			"Input to the agent goes through \"fak session open ID\" or the browser page (the Act RPC, by the holder of the input lease); " +
			"turns, output, tool calls and approval requests are written by the session's runner, " +
			"and lifecycle, attachment and lease events by fak itself.",
		setup: sessionAppendCommand,
	},
	{
		noun: "session", verb: "log",
		args:     []string{"ID"},
		flags:    "[--from SEQ] [--follow] [--stale]",
		synopsis: "Print a session's events",
		help: "Prints a session's events from --from up to the journal head, one per line. " +
			"With --follow it keeps printing new events until interrupted, reconnecting if the stream breaks.",
		setup: sessionLogCommand,
	},
	{
		noun: "session", verb: "stop",
		args:     []string{"ID"},
		flags:    "[--reason R]",
		synopsis: "Stop a session",
		help:     "Stops a session; a stopped session accepts no more events.",
		setup:    sessionStopCommand,
	},
	{
		noun: "session", verb: "purge",
		args:     []string{"ID"},
		synopsis: "Remove a stopped session's journal from the fleet",
		help: "Removes a stopped session — its record, journal, attachments and lineage edges — from the replicated " +
			"state, and journals the removal in the fleet's audit log (fakctl audit log). A session that is not " +
			"stopped is refused (NOT_STOPPED). Export it first if it is worth keeping (fakctl session export). " +
			"Sessions stopped longer than the agents' retain_stopped are purged by the leader without asking.",
		setup: sessionPurgeCommand,
	},
	{
		noun: "session", verb: "fresh",
		args:     []string{"ID"},
		flags:    "[--request-id R]",
		synopsis: "Rotate a session's provider binding, keeping its conversation",
		help: "Rotates the provider-facing session id and binds a new execution epoch (an epoch.changed event with reason fresh), " +
			"and prunes the cached provider state, printing how many entries went (0 is normal). " +
			"The journal, its messages, queued inputs and the budget are unchanged; no reset boundary is written.",
		setup: sessionFreshCommand,
	},
	{
		noun: "session", verb: "reset",
		args:     []string{"ID"},
		flags:    "[--request-id R]",
		synopsis: "Reset a session's model context at a reset_boundary",
		help: "Appends a reset_boundary: the runner rebuilds the model context from the events after it, while the whole history " +
			"stays readable. Queued inputs, the pending approval and pending turn state are cleared and the context axis is re-armed; " +
			"identity, title, objective, placement and the budget envelope stay. Refused with BUSY while a turn is in flight.",
		setup: sessionResetCommand,
	},
	{
		noun: "session", verb: "clear",
		args:     []string{"ID"},
		flags:    "[--request-id R]",
		synopsis: "Stop a session and continue in a new child session",
		help: "Stops the session (reason USER_CLEAR; it stays readable) and opens its child, which starts with a " +
			"fak.session.provider_boundary.v1 event (source clear) and prints as the session in force. The child keeps the title and " +
			"placement, drops the objective and every pending turn, input and approval, gets a re-armed context axis and shares " +
			"the budget envelope: what the lineage spent stays spent.",
		setup: sessionClearCommand,
	},
	{
		noun: "session", verb: "new",
		args:     []string{"ID"},
		flags:    "[--request-id R]",
		synopsis: "Like clear, with boundary source new",
		help:     "Like \"session clear\" (stop reason USER_NEW, boundary source new): the provenance stays distinct from a clear.",
		setup:    sessionNewCommand,
	},
	{
		noun: "session", verb: "fork",
		args:     []string{"ID"},
		flags:    "[--at SEQ] [--request-id R]",
		synopsis: "Branch a session's history into a new session",
		help: "Creates a session whose journal is a copy of the source's events up to --at (default: the head), at the same addresses, " +
			"followed by session.forked. The source is untouched and keeps running; queued inputs are not inherited; " +
			"the fork shares the budget envelope. Stopped sessions can be forked too.",
		setup: sessionForkCommand,
	},
	{
		noun: "session", verb: "export",
		args:     []string{"ID"},
		flags:    "[--lineage] [-o jsonl|html]",
		synopsis: "Write a session's whole history as JSON lines or one HTML page",
		help: "Writes every event of the session from #1 — what a reset hid from the model included — to stdout: one JSON object per line " +
			"(session_id, seq, time, kind, text, summary, data) with -o jsonl (the default), or one self-contained HTML page to read offline " +
			"with -o html: transcript, tool calls and results, approvals, moves and budget charges, each worded as every client words it. " +
			"--lineage exports the session's whole clear/new/fork tree, the root first and each session after its parent.",
		setup:  sessionExportCommand,
		output: exportOutputOK,
	},
	{
		noun: "session", verb: "lineage",
		args:     []string{"ID"},
		synopsis: "Show the tree of sessions a session belongs to",
		help: "Shows the lineage of a session from its root: every session cleared, renewed or forked from another, indented under its " +
			"parent, with the source of the boundary (clear, new, fork), the fork address, the state and the stop reason.",
		setup: sessionLineageCommand,
	},
	{
		noun: "session", verb: "interrupt",
		args:     []string{"ID"},
		flags:    "[--steal]",
		synopsis: "Interrupt a session's running turn",
		help: "Interrupts the turn the session's agent is running: fakctl attaches (client kind fakctl), takes the input lease " +
			"(--steal takes it from the client holding it; without it, a lease held by another client is an error naming the holder), " +
			"interrupts, and detaches, releasing the lease. The fleet closes the turn (turn.completed, status interrupted, by this " +
			"attachment) and the runner stops it; the next queued input gets its turn. Prints the turn interrupted, or with -o json " +
			"its turn.completed event. Exits 0 only when a turn was interrupted: NO_TURN_RUNNING when none runs, EXTERNAL_RUNTIME for " +
			"a session whose agent runs under fak guard on another machine.",
		setup: sessionInterruptCommand,
	},
	{
		noun: "session", verb: "move",
		args: []string{"ID"},
		flags: "[--to NODE] [--model M] [--provider P] [--adapter NAME] [--account-ref NAME] [--accept-degradation] " +
			"[--interrupt] [--safe-point-timeout 30s] [--timeout D] [--request-id R]",
		synopsis: "Move a session to another node or placement",
		help: "Moves the session's execution to --to (default: the least loaded node the fleet admits), optionally with another " +
			"model, provider, runtime adapter or account, and prints each transition as the fleet commits it, with the milliseconds " +
			"since the request: SAFE_POINT_REQUESTED (the source finishes its turn in flight and starts no new one), CHECKPOINTED at an " +
			"address of the journal, DESTINATION_ADMITTED (the checks the destination passed), RESTORED as a new epoch on the " +
			"destination, CUTOVER_COMMITTED. The session, its journal and its attachments stay; clients follow the new epoch.\n\n" +
			"  Exits 0 on CUTOVER_COMMITTED and 1 on MOVE_FAILED or MOVE_UNSAFE, with the reason (a refused destination names every " +
			"failed check); the source epoch stays in charge. No safe point within --safe-point-timeout is MOVE_UNSAFE. A model, " +
			"provider or account change, or a runtime change that loses the session's provider thread, is refused unless " +
			"--accept-degradation; the refusal says what would be lost. The session's workspace moves with it. One move at a time: a second is refused with BUSY. " +
			"--interrupt induces the safe point: the turn in flight is closed as interrupted by the move in the entry that opens it, " +
			"instead of the move waiting for the turn to finish. A session bound by fak guard (its agent runs on the user's machine) " +
			"cannot be moved: EXTERNAL_RUNTIME. With -o json it prints the final move.",
		setup: sessionMoveCommand,
	},
	{
		noun: "session", verb: "move-status",
		args:     []string{"ID"},
		synopsis: "Show a session's move in progress, or its last one",
		help: "Shows the session's open move, or its last finished one: state, cause, source node and epoch, the requested " +
			"and the admitted placement, the checkpoint, the checks passed, the disclosed degradation, the new epoch, or the " +
			"failure's reason and the state it happened in.",
		setup: sessionMoveStatusCommand,
	},
	{
		noun: "usage", verb: "record",
		flags: "(--session ID | --launch ID) [--turns N] [--output-tokens N] [--queries N] [--spend AMOUNT] [--tool-calls N] " +
			"[--context-tokens N] [--request-id R]",
		synopsis: "Charge model usage to a session's budget",
		help: "Charges one model request, as a gateway does after each call (LifecycleService.RecordUsage): to --session, or to the " +
			"default session of --launch. Prints the charged session, its context axis and what remains of the shared envelope. " +
			"A charge that would pass a limit is refused with BUDGET_EXHAUSTED (exit 1), and the refusal is journaled.",
		setup: usageRecordCommand,
	},
	{
		noun: "launch", verb: "describe",
		args:     []string{"ID"},
		synopsis: "Show a guarded launch and its default session",
		help:     "Shows a launch bound by \"fak guard\": its provider, the session usage without a trace id is charged to, and the provider's session id.",
		setup:    launchDescribeCommand,
	},
	{
		noun: "node", verb: "list",
		synopsis: "List the nodes that host sessions",
		help: "Lists every node record with its gossip status, the active sessions it hosts out of its capacity (and how many " +
			"are moving), whether it is draining, and what it offers: runtime adapters, providers, models, labels " +
			"(-o json adds addresses and account refs).",
		setup: nodeListCommand,
	},
	{
		noun: "node", verb: "drain",
		args:     []string{"NODE"},
		flags:    "[--timeout 10m] [--no-wait]",
		synopsis: "Stop admitting sessions to a node and move its sessions away",
		help: "Marks the node draining: the fleet admits no session to it, and moves the sessions it hosts to other nodes one by " +
			"one. Prints each session as it leaves (its new node and epoch) and any move that failed (it is retried), until the " +
			"node hosts none, or --timeout passes (exit 1; the node stays draining). The node stays draining until node undrain.",
		setup: nodeDrainCommand,
	},
	{
		noun: "node", verb: "undrain",
		args:     []string{"NODE"},
		synopsis: "Let a drained node admit sessions again",
		help:     "Clears the node's draining flag; sessions are admitted to it again (none move back by themselves).",
		setup:    nodeUndrainCommand,
	},
	{
		noun: "snapshot", verb: "save",
		args:     []string{"FILE"},
		synopsis: "Save a snapshot of the fleet's state to a file",
		help: "Asks the leader for a consistent snapshot of the replicated state (sessions, journals, nodes, tokens) and writes " +
			"it to FILE (through FILE.tmp, renamed once complete and verified), reporting progress on stderr for large files. " +
			"Prints the snapshot's Raft index and term, size, checksum and what it holds. Needs the operator role.",
		setup: snapshotSaveCommand,
	},
	{
		noun: "snapshot", verb: "restore",
		args:     []string{"FILE"},
		synopsis: "Replace the fleet's state with a saved snapshot",
		help: "Sends a snapshot file to the leader, which checks its header and checksum and installs it on the whole fleet " +
			"through Raft: every session, journal and token goes back to the state saved; whatever was written since is gone. " +
			"A file that does not verify is refused (INVALID_SNAPSHOT) and nothing changes. Prints the Raft index the fleet " +
			"is at once restored. Asks no question; needs the operator role.",
		setup: snapshotRestoreCommand,
	},
	{
		noun: "snapshot", verb: "inspect",
		args:     []string{"FILE"},
		synopsis: "Show a snapshot file's header and verify its checksum",
		help: "Reads a snapshot file offline: prints its header (format version, Raft index and term, the node that took it " +
			"and when, size, SHA-256, sessions, events, ACL tokens) after verifying the state against the checksum; " +
			"exits 1 if it does not verify.",
		setup: snapshotInspectCommand,
	},
	{
		noun: "operator", verb: "raft remove-peer",
		flags:    "--id NAME",
		synopsis: "Remove a server from the Raft configuration",
		help: "Removes the server --id from the Raft configuration, for a server gone for good (the leader also removes a " +
			"server dead for longer than --dead-server-grace by itself). Refused with NOT_FOUND for a server not in the " +
			"configuration, with PEER_IS_LEADER for the leader (transfer leadership first) and with PEER_ALIVE for a server " +
			"alive in gossip (the leader would add it back: stop it, or make it leave with \"fakctl cluster leave\").",
		setup: operatorRaftRemovePeerCommand,
	},
	{
		noun: "operator", verb: "raft transfer-leader",
		flags:    "[--to NAME]",
		synopsis: "Hand Raft leadership to another voter",
		help: "Asks the leader to hand leadership to the voter --to (default: a voter Raft picks) and prints the new leader " +
			"once known. Refused with NOT_FOUND when --to is not a voter of the configuration.",
		setup: operatorRaftTransferLeaderCommand,
	},
	{
		noun: "operator", verb: "verify-replay",
		flags:    "[--node NAME | --all] [--timeout 10m]",
		synopsis: "Check that a node's state equals its rebuild from snapshot and log",
		help: "Asks a node to rebuild its replicated state in scratch files beside its own: from its latest Raft snapshot " +
			"and the log entries after it, and from its log alone while the log still starts at index 1, then to compare " +
			"each rebuild's content (every bucket's keys and values) with its live state at the same index. Prints a row " +
			"per node: the live index, the snapshot restored, the entries replayed, each rebuild's verdict and the live " +
			"digest, and for a difference the buckets that differ and the first differing key. The node at --addr checks " +
			"itself, or relays to --node; --all checks every server of the Raft configuration. Exits 1 when a rebuild " +
			"differs or a node could not be checked. Needs the operator role.",
		setup: operatorVerifyReplayCommand,
	},
	{
		noun: "audit", verb: "log",
		flags:    "[--from SEQ]",
		synopsis: "Show the fleet's audit log (purged sessions)",
		help: "Shows the fleet's audit log, oldest first: every session purged, by an operator (fakctl session purge) " +
			"or by retention (retain_stopped), with what it held and when it had stopped. The log itself is never purged.",
		setup: auditLogCommand,
	},
	{
		noun: "acl", verb: "token create",
		flags:    "--role read|agent|operator [--description D] [--request-id R]",
		synopsis: "Create an API token with a role",
		help: "Creates an API token kept in the replicated state and prints its accessor id, role and secret. The secret is " +
			"shown only this once (only its hash is stored). Roles: read (list, describe, watch, the fleet overview), agent " +
			"(read, plus creating and driving sessions and the lifecycle hooks), operator (everything). Needs an operator token.",
		setup: aclTokenCreateCommand,
	},
	{
		noun: "acl", verb: "token list",
		synopsis: "List the API tokens (never their secrets)",
		help: "Lists the tokens kept in the replicated state: accessor id, role, description and creation time. Tokens from " +
			"the nodes' token files are not listed. Needs an operator token.",
		setup: aclTokenListCommand,
	},
	{
		noun: "acl", verb: "token revoke",
		args:     []string{"ACCESSOR"},
		flags:    "[--request-id R]",
		synopsis: "Revoke an API token on every node",
		help: "Deletes the token with this accessor id from the replicated state: each node refuses it from the moment it " +
			"applies the revoke. Refused with NOT_FOUND for an unknown accessor. Needs an operator token.",
		setup: aclTokenRevokeCommand,
	},
	{
		noun: "bench", verb: "append",
		flags:    "[--sessions N] [--clients N] [--total N] [--size BYTES] [--batch N] [--addrs A,B]",
		synopsis: "Benchmark appends against the running fleet",
		help: "Creates --sessions sessions, then has --clients concurrent clients append --total events " +
			"of --size bytes, --batch events per call, and reports throughput and per-call latency.",
		setup: benchAppendCommand,
	},
}
