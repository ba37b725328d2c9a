// Runtime and account blocks of a config file (issue 14):
//
//	runtime "shell-agent" {
//	  adapter      = "exec"
//	  command      = ["/usr/local/bin/my-agent", "--json"]
//	  protocol     = "jsonl"
//	  turn_timeout = "30m"
//	}
//	runtime "gpt" {
//	  adapter     = "model"
//	  endpoint    = "http://127.0.0.1:8080/v1"
//	  model       = "gpt-4.1"
//	  account_ref = "openai-main"
//	  tools       = ["shell", "read_file", "write_file", "list_files"]
//	  approve     = "ask"
//	  price       = { input_per_mtok = 2.0, output_per_mtok = 8.0 }
//	}
//	account "openai-main" { api_key_env = "OPENAI_API_KEY" }
//	runtime "claude" {
//	  adapter = "claude"                 # or "codex", "gemini"
//	  command = ["/usr/local/bin/claude"] # the CLI and extra arguments
//	  policy  = "ask"                     # who decides tool approvals
//	}
//	account "anthropic-main" {             # the gateway forwards with it
//	  provider    = "anthropic"
//	  upstream    = "https://api.anthropic.com"
//	  api_key_env = "ANTHROPIC_API_KEY"
//	}
//	price "claude-sonnet-4*" { input_per_mtok = 3  output_per_mtok = 15 }
//
// price is an object, or a block written over several lines (HCL allows
// a one-line block only with a single argument).
//
// Unlike the flat keys they have no flag: they are decoded here into
// node.RuntimeConfig and node.AccountConfig, each remembering its
// file:line, and checked by the node before anything starts.

package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/fak-dev/fak/node"
)

// configBlocks are the runtime and account blocks of a config file.
type configBlocks struct {
	Runtimes []node.RuntimeConfig
	Accounts []node.AccountConfig
	Prices   []node.PriceConfig
}

var fileSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "runtime", LabelNames: []string{"name"}},
	{Type: "account", LabelNames: []string{"name"}},
	{Type: "price", LabelNames: []string{"model"}},
}}

// providerAdapters are the provider CLI runtimes.
var providerAdapters = []string{node.AdapterClaude, node.AdapterCodex, node.AdapterGemini}

// runtimeSettings: every setting of a runtime block and the adapters it
// belongs to.
var runtimeSettings = map[string][]string{
	"adapter":      nil, // every adapter
	"turn_timeout": {node.AdapterExec, node.AdapterModel, node.AdapterClaude, node.AdapterCodex, node.AdapterGemini},
	"sandbox":      {node.AdapterExec, node.AdapterModel, node.AdapterClaude, node.AdapterCodex, node.AdapterGemini},
	"account_ref":  {node.AdapterExec, node.AdapterModel, node.AdapterClaude, node.AdapterCodex, node.AdapterGemini},
	"command":      {node.AdapterExec, node.AdapterClaude, node.AdapterCodex, node.AdapterGemini},
	"protocol":     {node.AdapterExec},
	"endpoint":     {node.AdapterModel},
	"model":        {node.AdapterModel, node.AdapterClaude, node.AdapterCodex, node.AdapterGemini},
	"policy":       {node.AdapterClaude, node.AdapterCodex, node.AdapterGemini},
	"gateway":      {node.AdapterModel, node.AdapterClaude, node.AdapterCodex, node.AdapterGemini},
	"tools":        {node.AdapterModel},
	"approve":      {node.AdapterModel},
	"system":       {node.AdapterModel},
	"max_retries":  {node.AdapterModel},
	"echo_turn":    {node.AdapterEcho},
	"price":        {node.AdapterModel},
}

func runtimeSchema() *hcl.BodySchema {
	s := &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "price"}}}
	for _, k := range sortedKeys(runtimeSettings) {
		if k == "price" {
			continue // a block or an attribute: see decodeRuntime
		}
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: k, Required: k == "adapter"})
	}
	return s
}

var priceSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "input_per_mtok"}, {Name: "output_per_mtok"}}}

// modelPriceSchema is a top-level price block's: the gateway's prices.
var modelPriceSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "input_per_mtok"}, {Name: "output_per_mtok"}, {Name: "cache_read_per_mtok"}, {Name: "cache_write_per_mtok"},
}}

var accountSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "api_key_env"}, {Name: "api_key_file"}, {Name: "provider"}, {Name: "upstream"}, {Name: "pass_through"},
}}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func at(r hcl.Range) string { return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line) }

// decodeBlocks decodes the runtime and account blocks of a file.
func decodeBlocks(blocks hcl.Blocks) (*configBlocks, error) {
	out := &configBlocks{}
	var errs []error
	for _, b := range blocks {
		switch b.Type {
		case "runtime":
			r, err := decodeRuntime(b)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out.Runtimes = append(out.Runtimes, r)
		case "account":
			a, err := decodeAccount(b)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out.Accounts = append(out.Accounts, a)
		case "price":
			pr, err := decodeModelPrice(b)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out.Prices = append(out.Prices, pr)
		}
	}
	return out, errors.Join(errs...)
}

func decodeAccount(b *hcl.Block) (node.AccountConfig, error) {
	a := node.AccountConfig{Name: b.Labels[0], Source: at(b.DefRange)}
	content, diags := b.Body.Content(accountSchema)
	if diags.HasErrors() {
		return a, diagsError(diags)
	}
	var errs []error
	for name, attr := range content.Attributes {
		if name == "pass_through" {
			b, err := boolAttr(attr)
			if err != nil {
				errs = append(errs, err)
			}
			a.PassThrough = b
			continue
		}
		s, err := stringAttr(attr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch name {
		case "api_key_env":
			a.APIKeyEnv = s
		case "api_key_file":
			a.APIKeyFile = s
		case "provider":
			a.Provider = s
		case "upstream":
			a.Upstream = s
		}
	}
	return a, errors.Join(errs...)
}

// decodeModelPrice decodes price "MODEL" { input_per_mtok = 3 … }.
func decodeModelPrice(b *hcl.Block) (node.PriceConfig, error) {
	p := node.PriceConfig{Model: b.Labels[0], Source: at(b.DefRange)}
	err := decodeNumbers(b.Body, modelPriceSchema, map[string]*float64{
		"input_per_mtok": &p.InputPerMTok, "output_per_mtok": &p.OutputPerMTok,
		"cache_read_per_mtok": &p.CacheReadPerMTok, "cache_write_per_mtok": &p.CacheWritePerMTok})
	return p, err
}

// decodeNumbers decodes a block of number attributes into dst by name.
func decodeNumbers(body hcl.Body, schema *hcl.BodySchema, dst map[string]*float64) error {
	content, diags := body.Content(schema)
	if diags.HasErrors() {
		return diagsError(diags)
	}
	var errs []error
	for name, attr := range content.Attributes {
		f, err := numberAttr(attr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		*dst[name] = f
	}
	return errors.Join(errs...)
}

func boolAttr(attr *hcl.Attribute) (bool, error) {
	v, err := attrValue(attr)
	if err != nil {
		return false, err
	}
	if !v.Type().Equals(cty.Bool) {
		return false, fmt.Errorf("%s: %s: want true or false, got %s", at(attr.NameRange), attr.Name, v.Type().FriendlyName())
	}
	return v.True(), nil
}

func decodeRuntime(b *hcl.Block) (node.RuntimeConfig, error) {
	r := node.RuntimeConfig{Name: b.Labels[0], Source: at(b.DefRange)}
	content, rest, diags := b.Body.PartialContent(runtimeSchema())
	if diags.HasErrors() {
		return r, diagsError(diags)
	}
	// What is left may only be price = { ... }.
	restContent, diags := rest.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "price"}}})
	if diags.HasErrors() {
		return r, diagsError(diags)
	}
	if a := content.Attributes["adapter"]; a != nil {
		s, err := stringAttr(a)
		if err != nil {
			return r, err
		}
		r.Adapter = s
	}
	var errs []error
	known := slices.Contains(append([]string{node.AdapterEcho, node.AdapterExec, node.AdapterModel}, providerAdapters...), r.Adapter)
	for _, name := range sortedAttrs(content.Attributes) {
		attr := content.Attributes[name]
		if for_ := runtimeSettings[name]; known && for_ != nil && !slices.Contains(for_, r.Adapter) {
			errs = append(errs, fmt.Errorf("%s: %s is not a setting of adapter %q (it is for %s)", at(attr.NameRange), name, r.Adapter, strings.Join(for_, ", ")))
			continue
		}
		if err := setRuntimeAttr(&r, name, attr); err != nil {
			errs = append(errs, err)
		}
	}
	for _, pb := range content.Blocks {
		if known && r.Adapter != node.AdapterModel {
			errs = append(errs, fmt.Errorf("%s: price is not a setting of adapter %q (it is for model)", at(pb.DefRange), r.Adapter))
			continue
		}
		errs = append(errs, decodeNumbers(pb.Body, priceSchema, map[string]*float64{
			"input_per_mtok": &r.InputPerMTok, "output_per_mtok": &r.OutputPerMTok}))
	}
	if pa := restContent.Attributes["price"]; pa != nil {
		if known && r.Adapter != node.AdapterModel {
			errs = append(errs, fmt.Errorf("%s: price is not a setting of adapter %q (it is for model)", at(pa.NameRange), r.Adapter))
		} else if err := priceAttr(&r, pa); err != nil {
			errs = append(errs, err)
		}
	}
	return r, errors.Join(errs...)
}

// priceAttr decodes price = { input_per_mtok = 2.0, output_per_mtok = 8.0 }.
func priceAttr(r *node.RuntimeConfig, attr *hcl.Attribute) error {
	v, err := attrValue(attr)
	if err != nil {
		return err
	}
	ty := v.Type()
	if !ty.IsObjectType() && !ty.IsMapType() {
		return fmt.Errorf("%s: price: want { input_per_mtok = 2.0, output_per_mtok = 8.0 }, got %s", at(attr.NameRange), ty.FriendlyName())
	}
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if e.IsNull() || !e.Type().Equals(cty.Number) {
			return fmt.Errorf("%s: price.%s: want a number", at(attr.NameRange), k.AsString())
		}
		f, _ := e.AsBigFloat().Float64()
		switch k.AsString() {
		case "input_per_mtok":
			r.InputPerMTok = f
		case "output_per_mtok":
			r.OutputPerMTok = f
		default:
			return fmt.Errorf("%s: price.%s: unknown; the prices are input_per_mtok and output_per_mtok", at(attr.NameRange), k.AsString())
		}
	}
	return nil
}

func sortedAttrs(m hcl.Attributes) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return m[a].Range.Start.Byte - m[b].Range.Start.Byte })
	return keys
}

func setRuntimeAttr(r *node.RuntimeConfig, name string, attr *hcl.Attribute) error {
	var err error
	switch name {
	case "adapter":
	case "command":
		r.Command, err = listAttr(attr)
		if err == nil && len(r.Command) > 0 {
			r.Command[0], err = programPath(r.Command[0])
		}
	case "tools":
		r.Tools, err = listAttr(attr)
	case "approve":
		r.Approve, err = approveAttr(attr)
	case "protocol":
		r.Protocol, err = stringAttr(attr)
	case "sandbox":
		r.Sandbox, err = stringAttr(attr)
	case "account_ref":
		r.AccountRef, err = stringAttr(attr)
	case "endpoint":
		r.Endpoint, err = stringAttr(attr)
	case "model":
		r.Model, err = stringAttr(attr)
	case "policy":
		r.Policy, err = stringAttr(attr)
	case "gateway":
		var b bool
		b, err = boolAttr(attr)
		r.Gateway = &b
	case "system":
		r.System, err = stringAttr(attr)
	case "max_retries":
		var f float64
		f, err = numberAttr(attr)
		n := int(f)
		r.MaxRetries = &n
	case "turn_timeout":
		r.TurnTimeout, err = durationAttr(attr)
	case "echo_turn":
		r.EchoTurn, err = durationAttr(attr)
	}
	return err
}

// programPath makes a relative program path ("examples/agents/shout.sh")
// absolute against the agent's working directory, as every relative path
// of a config file is: the program runs in the session's workspace. A bare
// name ("python3") is looked up on PATH when the turn runs.
func programPath(p string) (string, error) {
	if !strings.Contains(p, "/") || filepath.IsAbs(p) {
		return p, nil
	}
	return filepath.Abs(p)
}

func attrValue(attr *hcl.Attribute) (cty.Value, error) {
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() {
		return cty.NilVal, diagsError(diags)
	}
	if v.IsNull() {
		return cty.NilVal, fmt.Errorf("%s: %s: want a value, got null", at(attr.NameRange), attr.Name)
	}
	return v, nil
}

func stringAttr(attr *hcl.Attribute) (string, error) {
	v, err := attrValue(attr)
	if err != nil {
		return "", err
	}
	if !v.Type().Equals(cty.String) {
		return "", fmt.Errorf(`%s: %s: want a string such as %s = "…", got %s`, at(attr.NameRange), attr.Name, attr.Name, v.Type().FriendlyName())
	}
	return v.AsString(), nil
}

func numberAttr(attr *hcl.Attribute) (float64, error) {
	v, err := attrValue(attr)
	if err != nil {
		return 0, err
	}
	if !v.Type().Equals(cty.Number) {
		return 0, fmt.Errorf("%s: %s: want a number such as %s = 2.5, got %s", at(attr.NameRange), attr.Name, attr.Name, v.Type().FriendlyName())
	}
	f, _ := v.AsBigFloat().Float64()
	return f, nil
}

func durationAttr(attr *hcl.Attribute) (time.Duration, error) {
	s, err := stringAttr(attr)
	if err != nil {
		return 0, err
	}
	d, perr := time.ParseDuration(s)
	if perr != nil {
		return 0, fmt.Errorf(`%s: %s = %q: want a duration such as "30s" or "30m"`, at(attr.NameRange), attr.Name, s)
	}
	return d, nil
}

func listAttr(attr *hcl.Attribute) ([]string, error) {
	v, err := attrValue(attr)
	if err != nil {
		return nil, err
	}
	ty := v.Type()
	if !(ty.IsTupleType() || ty.IsListType()) {
		return nil, fmt.Errorf(`%s: %s: want a list of strings such as %s = ["a", "b"], got %s`, at(attr.NameRange), attr.Name, attr.Name, ty.FriendlyName())
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() || !e.Type().Equals(cty.String) {
			return nil, fmt.Errorf("%s: %s: every element must be a string", at(attr.NameRange), attr.Name)
		}
		out = append(out, e.AsString())
	}
	return out, nil
}

// approveAttr: "ask" (every tool call waits for a person) or the list of
// tools that run without asking.
func approveAttr(attr *hcl.Attribute) ([]string, error) {
	v, err := attrValue(attr)
	if err != nil {
		return nil, err
	}
	if v.Type().Equals(cty.String) {
		if v.AsString() != "ask" {
			return nil, fmt.Errorf(`%s: approve = %q: write approve = "ask" or a list of tools that run without asking, e.g. approve = ["read_file", "list_files"]`, at(attr.NameRange), v.AsString())
		}
		return nil, nil
	}
	return listAttr(attr)
}
