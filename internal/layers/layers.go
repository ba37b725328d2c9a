// Package layers states fak's layering as rules over the module's import
// graph and checks them: layers only point down (fsm at the bottom, then
// cluster and placement, then api, then node, then the binaries in cmd/).
// Its test loads the graph from the source, every .go file whatever its
// build tags and test files included, and fails with each violation's
// import chain; it runs in go test ./... and so in make test.
//
// It imports nothing of fak.
package layers

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Rules is fak's layering. Patterns are module-relative, as in go list:
// "fsm/..." is fsm and every package below it, "..." every package.
var Rules = []Rule{
	{
		Name: "(a) fsm imports nothing of fak but its own packages (fsm/fsmpb, its generated types)",
		From: []string{"fsm/..."}, Only: []string{"fsm/..."},
	},
	{
		Name: "(b) cluster imports only fsm (never api, node, cmd, chaos)",
		From: []string{"cluster/..."}, Only: []string{"cluster/...", "fsm/..."},
	},
	{
		Name: "(c) nothing imports cmd/ (its packages are mains)",
		From: []string{"..."}, Never: []string{"cmd/..."},
	},
	{
		Name: "(d) placement imports only fsm",
		From: []string{"placement/..."}, Only: []string{"placement/...", "fsm/..."},
	},
	{
		Name: "(e) nothing below node (fsm, cluster, placement) imports node",
		From: []string{"fsm/...", "cluster/...", "placement/..."}, Never: []string{"node/..."},
	},
	{
		Name: "(f) api never imports node, cmd or chaos",
		From: []string{"api/..."}, Never: []string{"node/...", "cmd/...", "chaos/..."},
	},
	{
		Name: "(g) the clients (fakctl, client/) never link the server: api's server package, cluster (raft, memberlist, bbolt), fsm, placement, node",
		From: []string{"cmd/fakctl", "client/..."}, Never: []string{"api", "cluster", "fsm/...", "placement/...", "node/..."},
		Linked: true,
	},
}

// A Rule constrains what the packages matching From may reach, directly or
// through other packages of the module: only packages matching Only (when
// set), and never one matching Never.
type Rule struct {
	Name  string
	From  []string
	Only  []string
	Never []string
	// Linked: the rule is about what the package links into its binary,
	// so its test files' imports (a test fleet) are not followed.
	Linked bool
}

// Package is one package of the module and the packages of the module it
// imports (module-relative paths).
type Package struct {
	Path        string
	Imports     []string // by its non-test files
	TestImports []string // by its _test.go files, in-package and external
}

// Graph is the module's packages by module-relative path.
type Graph map[string]*Package

// A Violation is a package that reaches one its rule forbids. Chain runs
// from the package to the forbidden one; Test says the first step is an
// import in a test file.
type Violation struct {
	Rule  string
	Chain []string
	Test  bool
}

func (v Violation) String() string {
	s := v.Rule + ": " + strings.Join(v.Chain, " -> ")
	if v.Test {
		s += " (first import in a test file)"
	}
	return s
}

// Match reports whether the module-relative package path p matches
// pattern: "x/..." is x and every package below it, "..." every package,
// anything else that package only.
func Match(pattern, p string) bool {
	if pattern == "..." {
		return true
	}
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == tree || strings.HasPrefix(p, tree+"/")
	}
	return p == pattern
}

func matchAny(patterns []string, p string) bool {
	return slices.ContainsFunc(patterns, func(pattern string) bool { return Match(pattern, p) })
}

func (r *Rule) forbids(p string) bool {
	return (r.Only != nil && !matchAny(r.Only, p)) || matchAny(r.Never, p)
}

// Check returns every violation of rules in g, in a stable order: for each
// rule and each package it constrains, each forbidden package that package
// reaches first (a path does not continue through a forbidden package),
// with the shortest chain.
func Check(g Graph, rules []Rule) []Violation {
	paths := make([]string, 0, len(g))
	for p := range g {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var out []Violation
	for i := range rules {
		r := &rules[i]
		for _, p := range paths {
			if matchAny(r.From, p) {
				out = append(out, r.check(g, p)...)
			}
		}
	}
	return out
}

// check walks breadth first from package start: its own imports, test
// files' included, then the non-test imports of what it reaches.
func (r *Rule) check(g Graph, start string) []Violation {
	type step struct {
		from string
		test bool
	}
	seen := map[string]step{start: {}}
	var queue []string
	visit := func(from, to string, test bool) {
		if _, ok := seen[to]; ok {
			return
		}
		seen[to] = step{from: from, test: test}
		queue = append(queue, to)
	}
	pkg := g[start]
	for _, imp := range sorted(pkg.Imports) {
		visit(start, imp, false)
	}
	if !r.Linked {
		for _, imp := range sorted(pkg.TestImports) {
			visit(start, imp, true)
		}
	}
	var out []Violation
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if r.forbids(p) {
			chain := []string{p}
			for at := p; at != start; at = seen[at].from {
				chain = append(chain, seen[at].from)
			}
			slices.Reverse(chain)
			out = append(out, Violation{Rule: r.Name, Chain: chain, Test: seen[p].test})
			continue
		}
		if next := g[p]; next != nil {
			for _, imp := range sorted(next.Imports) {
				visit(p, imp, seen[p].test)
			}
		}
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// FindModule walks up from dir to the directory holding go.mod and returns
// that directory and the module path.
func FindModule(dir string) (root, module string, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			module, err := modulePath(data)
			return dir, module, err
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", "", errors.New("no go.mod above " + dir)
		}
		dir = parent
	}
}

func modulePath(gomod []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			rest = strings.TrimSpace(strings.SplitN(rest, "//", 2)[0])
			if p, err := strconv.Unquote(rest); err == nil {
				return p, nil
			}
			return rest, nil
		}
	}
	return "", errors.New("go.mod has no module line")
}

// Load reads the import graph of the module at root (module path module)
// from its source: every .go file go build would consider under any build
// tags, so a file behind a tag is checked too. It skips what the go command
// skips: directories named testdata or vendor or starting with . or _, and
// nested modules. Imports of other modules and the standard library are
// left out.
func Load(root, module string) (Graph, error) {
	g := Graph{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if file == root {
				return nil
			}
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(file, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		f, err := parser.ParseFile(fset, file, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(file))
		if err != nil {
			return err
		}
		p := filepath.ToSlash(rel)
		pkg := g[p]
		if pkg == nil {
			pkg = &Package{Path: p}
			g[p] = pkg
		}
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			var dep string
			switch {
			case imp == module:
				dep = "."
			case strings.HasPrefix(imp, module+"/"):
				dep = imp[len(module)+1:]
			default:
				continue
			}
			if dep == p {
				continue // an external test package importing its own
			}
			if strings.HasSuffix(name, "_test.go") {
				pkg.TestImports = append(pkg.TestImports, dep)
			} else {
				pkg.Imports = append(pkg.Imports, dep)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, pkg := range g {
		pkg.Imports, pkg.TestImports = sorted(pkg.Imports), sorted(pkg.TestImports)
	}
	return g, nil
}

// Covers reports whether some package of g matches pattern, so a rule
// about a folder that was renamed away does not pass by checking nothing.
func (g Graph) Covers(pattern string) bool {
	for p := range g {
		if Match(pattern, p) {
			return true
		}
	}
	return false
}
