package layers

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// intended is a small import graph laid out as fak intends.
func intended() Graph {
	return Graph{
		"fsm":                  {Imports: []string{"fsm/fsmpb"}},
		"fsm/fsmpb":            {},
		"cluster":              {Imports: []string{"fsm", "fsm/fsmpb", "cluster/snapshotfile"}, TestImports: []string{"fsm"}},
		"cluster/devca":        {Imports: []string{"cluster"}},
		"cluster/snapshotfile": {},
		"placement":            {Imports: []string{"fsm/fsmpb"}},
		"api":                  {Imports: []string{"api/gen", "cluster", "cluster/snapshotfile", "fsm", "placement"}},
		"api/gen":              {},
		"node":                 {Imports: []string{"api", "cluster", "fsm", "placement"}},
		"node/testcluster":     {Imports: []string{"node"}},
		"chaos":                {Imports: []string{"api/gen"}},
		"cmd/fak":              {Imports: []string{"node", "api"}, TestImports: []string{"node/testcluster"}},
		"api/apiclient":        {Imports: []string{"api/gen", "cluster/snapshotfile"}},
		"client/journal":       {Imports: []string{"api/gen"}},
		"cmd/fakctl":           {Imports: []string{"api/apiclient", "api/gen", "client/journal"}, TestImports: []string{"node/testcluster", "fsm"}},
	}
}

func TestIntendedGraphPasses(t *testing.T) {
	if vs := Check(intended(), Rules); len(vs) > 0 {
		t.Fatalf("violations in the intended layering: %v", vs)
	}
}

// Each rule fails on a graph that breaks it, naming the chain.
func TestEachRuleCanFail(t *testing.T) {
	for _, tc := range []struct {
		rule  string // prefix of the rule's name
		edit  func(Graph)
		wants []string // the rule's violations, chains only
	}{
		{"(a)", func(g Graph) { add(g, "fsm", "placement") }, []string{
			"fsm -> placement",
		}},
		{"(a)", func(g Graph) { g["fsm/fsmpb"].TestImports = []string{"cluster"} }, []string{
			"fsm/fsmpb -> cluster (first import in a test file)",
		}},
		{"(a)", func(g Graph) { g["fsm/rules"] = &Package{Imports: []string{"api/gen"}}; add(g, "fsm", "fsm/rules") }, []string{
			"fsm -> fsm/rules -> api/gen", // through a package of its own
			"fsm/rules -> api/gen",
		}},
		{"(b)", func(g Graph) { add(g, "cluster", "api/gen") }, []string{
			"cluster -> api/gen",
			"cluster/devca -> cluster -> api/gen",
		}},
		{"(b)", func(g Graph) { add(g, "cluster/snapshotfile", "chaos") }, []string{
			"cluster -> cluster/snapshotfile -> chaos",
			"cluster/devca -> cluster -> cluster/snapshotfile -> chaos",
			"cluster/snapshotfile -> chaos",
		}},
		{"(c)", func(g Graph) { add(g, "chaos", "cmd/fakctl") }, []string{
			"chaos -> cmd/fakctl",
		}},
		{"(c)", func(g Graph) { g["cmd/fak"].TestImports = append(g["cmd/fak"].TestImports, "cmd/fakctl") }, []string{
			"cmd/fak -> cmd/fakctl (first import in a test file)",
		}},
		{"(d)", func(g Graph) { add(g, "placement", "cluster") }, []string{
			"placement -> cluster",
		}},
		{"(e)", func(g Graph) { add(g, "placement", "node/testcluster") }, []string{
			"placement -> node/testcluster",
		}},
		{"(e)", func(g Graph) { g["cluster"].TestImports = []string{"node/testcluster"} }, []string{
			"cluster -> node/testcluster (first import in a test file)",
		}},
		{"(f)", func(g Graph) { add(g, "api", "node") }, []string{
			"api -> node",
		}},
		{"(f)", func(g Graph) { add(g, "api/gen", "chaos") }, []string{
			"api -> api/gen -> chaos",
			"api/apiclient -> api/gen -> chaos",
			"api/gen -> chaos",
		}},
		{"(g)", func(g Graph) { add(g, "cmd/fakctl", "api") }, []string{
			"cmd/fakctl -> api",
		}},
		{"(g)", func(g Graph) { add(g, "client/journal", "fsm") }, []string{
			"client/journal -> fsm",
			"cmd/fakctl -> client/journal -> fsm",
		}},
		{"(g)", func(g Graph) { add(g, "api/apiclient", "cluster") }, []string{
			"cmd/fakctl -> api/apiclient -> cluster",
		}},
	} {
		g := intended()
		tc.edit(g)
		var got []string
		for _, v := range Check(g, Rules) {
			if strings.HasPrefix(v.Rule, tc.rule) {
				s := v.String()
				got = append(got, s[len(v.Rule)+2:])
			}
		}
		if !slices.Equal(got, tc.wants) {
			t.Errorf("rule %s: violations %q; want %q", tc.rule, got, tc.wants)
		}
	}
}

func add(g Graph, from, to string) { g[from].Imports = append(g[from].Imports, to) }

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"fsm/...", "fsm", true},
		{"fsm/...", "fsm/fsmpb", true},
		{"fsm/...", "fsmx", false},
		{"fsm", "fsm/fsmpb", false},
		{"...", "cmd/fak", true},
	} {
		if got := Match(tc.pattern, tc.path); got != tc.want {
			t.Errorf("Match(%q, %q) = %v", tc.pattern, tc.path, got)
		}
	}
}

// Load reads imports from every file, build tags notwithstanding, splits
// test imports off and skips what the go command skips.
func TestLoad(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m // a comment\n\ngo 1.26\n")
	write("fsm/fsm.go", "package fsm\nimport (\n\t\"fmt\"\n\t\"example.com/m/fsm/pb\"\n\t\"example.com/other/x\"\n)\n")
	write("fsm/tagged.go", "//go:build sometag\n\npackage fsm\nimport _ \"example.com/m/api\"\n")
	write("fsm/fsm_test.go", "package fsm_test\nimport (\n\t\"example.com/m/fsm\"\n\t\"example.com/m/node\"\n)\n")
	write("fsm/pb/pb.go", "package pb\n")
	write("fsm/testdata/x.go", "package x\nimport \"example.com/m/cmd/a\"\n")
	write("_old/y.go", "package y\nimport \"example.com/m/cmd/a\"\n")
	write("nested/go.mod", "module example.com/nested\n")
	write("nested/z.go", "package z\nimport \"example.com/m/cmd/a\"\n")

	dir, module, err := FindModule(filepath.Join(root, "fsm", "pb"))
	if err != nil || dir != root || module != "example.com/m" {
		t.Fatalf("FindModule: %q %q %v", dir, module, err)
	}
	g, err := Load(root, module)
	if err != nil {
		t.Fatal(err)
	}
	want := Graph{
		"fsm":    {Path: "fsm", Imports: []string{"api", "fsm/pb"}, TestImports: []string{"node"}},
		"fsm/pb": {Path: "fsm/pb"},
	}
	if !reflect.DeepEqual(g, want) {
		for p, pkg := range g {
			t.Logf("%s: %+v", p, *pkg)
		}
		t.Fatal("graph differs")
	}
}
