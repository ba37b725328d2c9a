package main

import (
	"context"
	"flag"
	"fmt"
	"io"
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
}

func (cmd *command) path() string { return cmd.noun + " " + cmd.verb }

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
		noun: "session", verb: "create",
		flags:    "--title T [--objective O] [--node NAME] [--adapter NAME] [--model M] [--provider P] [--account-ref NAME] [--request-id R]",
		synopsis: "Create a session",
		help: "Creates a session and prints its ID. Retrying with the same --request-id returns the same session.\n\n" +
			"  The first execution epoch is placed on --node (default: the node at --addr), whose runner runs the agent " +
			"with the --adapter runtime adapter (default echo, a deterministic agent for tests and demos); " +
			"--model, --provider and --account-ref complete the placement. The journal starts with session.created " +
			"and epoch.changed, so a new session's head is 2.",
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
		noun: "bench", verb: "append",
		flags:    "[--sessions N] [--clients N] [--total N] [--size BYTES] [--batch N] [--addrs A,B]",
		synopsis: "Benchmark appends against the running fleet",
		help: "Creates --sessions sessions, then has --clients concurrent clients append --total events " +
			"of --size bytes, --batch events per call, and reports throughput and per-call latency.",
		setup: benchAppendCommand,
	},
}

func findCommand(noun, verb string) *command {
	for _, cmd := range commands {
		if cmd.noun == noun && cmd.verb == verb {
			return cmd
		}
	}
	return nil
}

func isNoun(noun string) bool {
	for _, cmd := range commands {
		if cmd.noun == noun {
			return true
		}
	}
	return false
}

// checkArgs verifies that exactly the command's positional arguments were given.
func checkArgs(cmd *command, args []string) error {
	switch {
	case len(args) < len(cmd.args):
		return usageErrorf("missing argument %s", strings.Join(cmd.args[len(args):], " "))
	case len(args) > len(cmd.args):
		return usageErrorf("unexpected argument %q", args[len(cmd.args)])
	}
	return nil
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, "Usage: fakctl [global options] <command> [options] [args]\n\n")
	fmt.Fprint(w, "Operate a fak fleet.\n")
	noun := ""
	for _, cmd := range commands {
		if cmd.noun != noun {
			noun = cmd.noun
			fmt.Fprintf(w, "\n%s commands:\n", capitalize(noun))
		}
		fmt.Fprintf(w, "    %-20s%s\n", cmd.path(), cmd.synopsis)
	}
	fmt.Fprint(w, "\nGlobal options (accepted before or after the command):\n\n")
	printFlags(w, newGlobalFlagSet(), isGlobalFlag)
	fmt.Fprint(w, "\nRun \"fakctl help <command>\" or \"fakctl <command> -h\" for a command's options.\n")
}

func printNounUsage(w io.Writer, noun string) {
	fmt.Fprintf(w, "Usage: fakctl %s <subcommand> [options] [args]\n\nSubcommands:\n", noun)
	for _, cmd := range commands {
		if cmd.noun == noun {
			fmt.Fprintf(w, "    %-12s%s\n", cmd.verb, cmd.synopsis)
		}
	}
	fmt.Fprintf(w, "\nRun \"fakctl help %s <subcommand>\" for a subcommand's options.\n", noun)
}

func printCommandHelp(w io.Writer, cmd *command) {
	fs := newGlobalFlagSet()
	cmd.setup(fs)
	line := append([]string{"fakctl", cmd.noun, cmd.verb}, cmd.args...)
	if cmd.flags != "" {
		line = append(line, cmd.flags)
	}
	fmt.Fprintf(w, "Usage: %s [global options]\n\n  %s\n", strings.Join(line, " "), cmd.help)
	if hasFlags(fs, isCommandFlag) {
		fmt.Fprint(w, "\nOptions:\n\n")
		printFlags(w, fs, isCommandFlag)
	}
	fmt.Fprint(w, "\nGlobal options:\n\n")
	printFlags(w, fs, isGlobalFlag)
}

// printFlags lists the flags of fs that keep selects, in the style of
// flag.PrintDefaults but with GNU-style double dashes.
func printFlags(w io.Writer, fs *flag.FlagSet, keep func(name string) bool) {
	fs.VisitAll(func(f *flag.Flag) {
		if !keep(f.Name) {
			return
		}
		valueName, usage := flag.UnquoteUsage(f)
		dashes := "--"
		if len(f.Name) == 1 {
			dashes = "-"
		}
		fmt.Fprintf(w, "  %s%s", dashes, f.Name)
		if valueName != "" {
			fmt.Fprintf(w, " %s", valueName)
		}
		fmt.Fprintf(w, "\n        %s", usage)
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

func hasFlags(fs *flag.FlagSet, keep func(name string) bool) bool {
	found := false
	fs.VisitAll(func(f *flag.Flag) { found = found || keep(f.Name) })
	return found
}

func isCommandFlag(name string) bool { return !isGlobalFlag(name) }

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func joinArgs(args []string) string { return strings.Join(args, " ") }
