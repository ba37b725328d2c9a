// Config files for `fak agent --config FILE`.
//
// A config file sets agent flags; it knows no settings of its own, so every
// flag the agent has (now or later) works in the file without changes here.
// The rules:
//
//   - A key is a flag name with '-' written as '_': --data-dir is data_dir,
//     --bootstrap-expect is bootstrap_expect. Unknown keys are errors that
//     name the file and line (and the nearest known key).
//   - A string, number or bool value sets the flag once with its string form:
//     bootstrap_expect = 3, voter = false, dead_server_grace = "30s"
//     (durations are strings in Go's form).
//   - A list sets a repeatable flag once per element, in order:
//     join = ["10.0.0.2:7601", "10.0.0.3:7601"], gossip_key = ["new", "old"].
//     The repeatable flags are --join, --label, --account-ref, --provider,
//     --model and --gossip-key; a list for any other flag is an error.
//   - An object sets a key=value flag (--label) once per entry, in key order:
//     label = { zone = "a", gpu = "true" }; a list of "k=v" strings works too.
//   - Flags on the command line win: the file sets only the flags the command
//     line did not, and a repeatable flag given on the command line replaces
//     the file's values instead of adding to them.
//   - --config itself cannot be set in a file, and one --config is allowed.
//
// A file named *.json is JSON (an object of the same keys); any other name is
// HCL. Relative paths in values are relative to the agent's working directory
// (/ under systemd), so write absolute ones.

package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
)

// repeatableFlag marks flag values that add one value per Set, so a list in
// a config file sets them once per element.
type repeatableFlag interface{ repeatable() }

// keyValueFlag marks flag values that take key=value, so an object in a
// config file sets them once per entry.
type keyValueFlag interface{ keyValue() }

func (*stringList) repeatable() {}
func (*labelFlag) repeatable()  {}
func (*labelFlag) keyValue()    {}

// configFlag is --config: the path of one config file.
type configFlag struct{ path string }

func (c *configFlag) String() string { return c.path }

func (c *configFlag) Set(v string) error {
	if c.path != "" {
		return errors.New("given more than once; put every setting in one file")
	}
	if v == "" {
		return errors.New("want a file name")
	}
	c.path = v
	return nil
}

// parseAgentFlags defines --config on fs, parses args and then applies the
// config file to the flags the command line left unset. Config errors are
// printed to fs.Output() one per line, like flag errors, so callers treat
// any error as a usage error.
func parseAgentFlags(fs *flag.FlagSet, args []string) error {
	_, err := parseAgentConfig(fs, args)
	return err
}

// parseAgentConfig is parseAgentFlags that also returns the file's runtime
// and account blocks (none without --config).
func parseAgentConfig(fs *flag.FlagSet, args []string) (*configBlocks, error) {
	var cf configFlag
	fs.Var(&cf, "config", "read agent flags, runtime and account blocks from `FILE`: HCL, or JSON when named *.json; keys are flag names with '_' for '-' (data_dir = \"/var/lib/fak\"), and command-line flags win")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if cf.path == "" {
		return &configBlocks{}, nil
	}
	blocks, err := applyConfigFile(fs, cf.path)
	if err != nil {
		for line := range strings.SplitSeq(err.Error(), "\n") {
			fmt.Fprintln(fs.Output(), fs.Name()+":", line)
		}
		return nil, err
	}
	return blocks, nil
}

// applyConfigFile sets the flags of fs the file at path names, except those
// already set (on the command line), and decodes its blocks. It reports
// every problem in the file, one per line of the error.
func applyConfigFile(fs *flag.FlagSet, path string) (*configBlocks, error) {
	attrs, rawBlocks, err := readConfigFile(path)
	if err != nil {
		return nil, err
	}
	blocks, berr := decodeBlocks(rawBlocks)
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	var errs []error
	for _, attr := range attrs {
		at := fmt.Sprintf("%s:%d", attr.NameRange.Filename, attr.NameRange.Start.Line)
		name := strings.ReplaceAll(attr.Name, "_", "-")
		f := fs.Lookup(name)
		switch {
		case name == "config":
			errs = append(errs, fmt.Errorf("%s: %s: --config cannot be set in a config file", at, attr.Name))
			continue
		case f == nil || strings.Contains(attr.Name, "-"):
			errs = append(errs, fmt.Errorf("%s: unknown key %s%s", at, attr.Name, suggestKey(fs, attr.Name)))
			continue
		case onCommandLine[name]:
			continue
		}
		val, diags := attr.Expr.Value(nil)
		if diags.HasErrors() {
			errs = append(errs, diagsError(diags))
			continue
		}
		vals, err := configValues(val, f)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", at, attr.Name, err))
			continue
		}
		for _, v := range vals {
			if err := fs.Set(name, v); err != nil {
				msg := fmt.Sprintf("%s: %s = %q: %v", at, attr.Name, v, err)
				if want := wantedValue(f); want != "" {
					msg += "; want " + want
				}
				errs = append(errs, errors.New(msg))
				break
			}
		}
	}
	if berr != nil {
		errs = append(errs, berr)
	}
	return blocks, errors.Join(errs...)
}

// readConfigFile parses the file at path and returns its attributes in the
// order they appear, and its blocks.
func readConfigFile(path string) ([]*hcl.Attribute, hcl.Blocks, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	var file *hcl.File
	var diags hcl.Diagnostics
	if strings.EqualFold(filepath.Ext(path), ".json") {
		file, diags = hcljson.Parse(src, path)
	} else {
		file, diags = hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	}
	if diags.HasErrors() {
		return nil, nil, diagsError(diags)
	}
	content, rest, diags := file.Body.PartialContent(fileSchema)
	if diags.HasErrors() {
		return nil, nil, diagsError(diags)
	}
	attrMap, diags := flatAttributes(rest)
	if diags.HasErrors() {
		return nil, nil, diagsError(diags)
	}
	attrs := make([]*hcl.Attribute, 0, len(attrMap))
	for _, a := range attrMap {
		attrs = append(attrs, a)
	}
	sort.Slice(attrs, func(i, j int) bool { return attrs[i].Range.Start.Byte < attrs[j].Range.Start.Byte })
	return attrs, content.Blocks, nil
}

// flatAttributes returns the attributes of what is left of a file once its
// runtime and account blocks are taken. Any other block (label { ... }) is
// an error naming its line. (hclsyntax's JustAttributes would count the
// blocks already taken as errors too.)
func flatAttributes(rest hcl.Body) (hcl.Attributes, hcl.Diagnostics) {
	b, ok := rest.(*hclsyntax.Body)
	if !ok {
		return rest.JustAttributes() // JSON: knows which properties were taken
	}
	var diags hcl.Diagnostics
	for _, blk := range b.Blocks {
		if blk.Type == "runtime" || blk.Type == "account" || blk.Type == "price" {
			continue
		}
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError,
			Summary: fmt.Sprintf("Unexpected %q block", blk.Type),
			Detail:  "The only blocks are runtime \"NAME\" { ... }, account \"NAME\" { ... } and price \"MODEL\" { ... }; write other settings as key = value.",
			Subject: &blk.TypeRange})
	}
	attrs := make(hcl.Attributes, len(b.Attributes))
	for name, a := range b.Attributes {
		attrs[name] = a.AsHCLAttribute()
	}
	return attrs, diags
}

// configValues turns a value from the file into the strings to Set f with.
func configValues(v cty.Value, f *flag.Flag) ([]string, error) {
	_, repeatable := f.Value.(repeatableFlag)
	_, keyValue := f.Value.(keyValueFlag)
	ty := v.Type()
	switch {
	case v.IsNull():
		return nil, errors.New("want a value, got null")
	case ty.IsPrimitiveType():
		s, err := scalarString(v)
		if err != nil {
			return nil, err
		}
		return []string{s}, nil
	case ty.IsTupleType() || ty.IsListType() || ty.IsSetType():
		if !repeatable {
			return nil, fmt.Errorf("takes one value, got a list (only repeatable flags take lists)")
		}
		var out []string
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			s, err := scalarString(e)
			if err != nil {
				return nil, fmt.Errorf("list element: %w", err)
			}
			out = append(out, s)
		}
		return out, nil
	case ty.IsObjectType() || ty.IsMapType():
		if !keyValue {
			return nil, fmt.Errorf("takes no object (only key=value flags such as label do)")
		}
		var out []string
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			s, err := scalarString(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k.AsString(), err)
			}
			out = append(out, k.AsString()+"="+s)
		}
		slices.Sort(out)
		return out, nil
	}
	return nil, fmt.Errorf("want a string, number, bool, list or object, got %s", ty.FriendlyName())
}

// scalarString is the flag form of a string, number or bool.
func scalarString(v cty.Value) (string, error) {
	if v.IsNull() {
		return "", errors.New("want a value, got null")
	}
	switch ty := v.Type(); {
	case ty.Equals(cty.String):
		return v.AsString(), nil
	case ty.Equals(cty.Number):
		return v.AsBigFloat().Text('f', -1), nil
	case ty.Equals(cty.Bool):
		if v.True() {
			return "true", nil
		}
		return "false", nil
	default:
		return "", fmt.Errorf("want a string, number or bool, got %s", ty.FriendlyName())
	}
}

// wantedValue says what a flag of Go's own types takes, because their Set
// errors ("parse error") do not.
func wantedValue(f *flag.Flag) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return ""
	}
	switch g.Get().(type) {
	case bool:
		return "true or false"
	case int, int64:
		return "an integer"
	case uint, uint64:
		return "a non-negative integer"
	case float64:
		return "a number"
	case time.Duration:
		return `a duration such as "30s" or "5m"`
	}
	return ""
}

// suggestKey names the known key nearest to an unknown one, if any is near.
func suggestKey(fs *flag.FlagSet, key string) string {
	best, bestDist := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "config" {
			return
		}
		known := strings.ReplaceAll(f.Name, "-", "_")
		if d := editDistance(strings.ReplaceAll(key, "-", "_"), known); d < bestDist {
			best, bestDist = known, d
		}
	})
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// diagsError turns HCL error diagnostics into one error line each, as
// file:line: summary: detail.
func diagsError(diags hcl.Diagnostics) error {
	var errs []error
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		if d.Subject != nil {
			msg = fmt.Sprintf("%s:%d: %s", d.Subject.Filename, d.Subject.Start.Line, msg)
		}
		errs = append(errs, errors.New(msg))
	}
	return errors.Join(errs...)
}
