package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/fak-dev/fak/api/apiclient"
)

// Output formats for -o.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// errHelp is returned by flag parsing when -h or --help was given.
var errHelp = flag.ErrHelp

// usageError is a mistake in how fakctl was invoked. It exits with
// exitUsage and shows the relevant usage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// globalOptions are accepted by every command. Empty addr and token mean
// "not given on the command line"; see resolveAddr and resolveToken.
type globalOptions struct {
	addr   string
	token  string
	output string
	tls    apiclient.TLSFiles // tlsflags.go
}

// register binds the global flags to o. The current values become the
// defaults, so flags parsed earlier in the command line are kept when a
// later flag set declares the same flags.
func (o *globalOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.addr, "addr", o.addr,
		"fak node to talk to, as `URL` or host:port (env FAK_ADDR; default "+defaultAddr+")")
	fs.StringVar(&o.token, "token", o.token,
		"API `TOKEN` (env FAK_TOKEN; else the file named by FAK_TOKEN_FILE; else ./"+devTokenPath+")")
	fs.StringVar(&o.output, "o", o.output, "output `FORMAT`: table or json")
	o.registerTLS(fs)
}

func (o *globalOptions) validate() error {
	if o.output != outputTable && o.output != outputJSON {
		return usageErrorf("invalid -o %q: want table or json", o.output)
	}
	return nil
}

func isGlobalFlag(name string) bool {
	return name == "addr" || name == "token" || name == "o" || isTLSFlag(name)
}

// newGlobalFlagSet returns a flag set with only the global flags, bound to
// throwaway options; it is used to print help.
func newGlobalFlagSet() *flag.FlagSet {
	opts := &globalOptions{output: outputTable}
	return newFlagSet("fakctl", opts)
}

// newFlagSet returns a flag set that reports errors to its caller instead
// of printing them, with the global flags bound to opts.
func newFlagSet(name string, opts *globalOptions) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	opts.register(fs)
	return fs
}

// parseGlobals parses global flags up to the first non-flag argument and
// returns the remaining arguments.
func (c *cli) parseGlobals(args []string) ([]string, error) {
	fs := newFlagSet("fakctl", &c.opts)
	if err := fs.Parse(args); err != nil {
		return nil, flagError(err)
	}
	return fs.Args(), nil
}

// parseInterspersed parses flags that may appear before, between or after
// the positional arguments (the flag package alone stops at the first
// positional one) and returns the positional arguments. Everything after
// "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, flagError(err)
		}
		rest := fs.Args()
		consumed := args[:len(args)-len(rest)]
		if len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// flagError turns a flag package error into errHelp or a usageError.
func flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return errHelp
	}
	return &usageError{msg: err.Error()}
}

// flagWasSet reports whether the named flag was given on the command line,
// as opposed to holding its default.
func flagWasSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
