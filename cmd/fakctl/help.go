package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// nounCommand is the command a noun runs by itself ("fakctl fleet"), unless
// args name one of the noun's verbs or ask for help.
func nounCommand(noun string, args []string) *command {
	cmd := findCommand(noun, "")
	if cmd == nil {
		return nil
	}
	if len(args) > 0 {
		if args[0] == "help" {
			return nil
		}
		for _, c := range commands {
			if c.noun == noun && c.verb != "" && strings.Fields(c.verb)[0] == args[0] {
				return nil
			}
		}
	}
	return cmd
}

func findCommand(noun, verb string) *command {
	for _, cmd := range commands {
		if cmd.noun == noun && cmd.verb == verb {
			return cmd
		}
	}
	return nil
}

// matchCommand finds noun's command whose verb, one word or several (as in
// "operator raft remove-peer"), begins words, preferring the longest; n is
// how many words the verb took.
func matchCommand(noun string, words []string) (cmd *command, n int) {
	for _, c := range commands {
		verb := strings.Fields(c.verb)
		if c.noun == noun && len(verb) <= len(words) && len(verb) > n && slices.Equal(verb, words[:len(verb)]) {
			cmd, n = c, len(verb)
		}
	}
	return cmd, n
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
		fmt.Fprintf(w, "    %s%s\n", padRight(cmd.path(), columnWidth(cmd.noun, 20, (*command).path)), cmd.synopsis)
	}
	fmt.Fprint(w, "\nGlobal options (accepted before or after the command):\n\n")
	printFlags(w, newGlobalFlagSet(), isGlobalFlag)
	fmt.Fprint(w, "\nRun \"fakctl help <command>\" or \"fakctl <command> -h\" for a command's options.\n")
}

func printNounUsage(w io.Writer, noun string) {
	if cmd := findCommand(noun, ""); cmd != nil {
		printCommandHelp(w, cmd) // the noun is itself a command
		return
	}
	fmt.Fprintf(w, "Usage: fakctl %s <subcommand> [options] [args]\n\nSubcommands:\n", noun)
	for _, cmd := range commands {
		if cmd.noun == noun {
			fmt.Fprintf(w, "    %s%s\n", padRight(cmd.verb, columnWidth(noun, 12, func(c *command) string { return c.verb })), cmd.synopsis)
		}
	}
	fmt.Fprintf(w, "\nRun \"fakctl help %s <subcommand>\" for a subcommand's options.\n", noun)
}

func printCommandHelp(w io.Writer, cmd *command) {
	fs := newGlobalFlagSet()
	cmd.setup(fs)
	line := append([]string{"fakctl", cmd.path()}, cmd.args...)
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
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "false" {
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
	if s == "acl" { // an acronym
		return "ACL"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func joinArgs(args []string) string { return strings.Join(args, " ") }

// columnWidth is the width of a listing's first column for noun's
// commands: at least least columns, and wide enough for the longest name
// with two spaces after it.
func columnWidth(noun string, least int, name func(*command) string) int {
	width := least
	for _, cmd := range commands {
		if cmd.noun == noun {
			width = max(width, len(name(cmd))+2)
		}
	}
	return width
}

// padRight pads s with spaces to width, keeping at least two spaces after
// it, for the command listings' columns.
func padRight(s string, width int) string {
	return s + strings.Repeat(" ", max(width-len(s), 2))
}
