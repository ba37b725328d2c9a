package workspace_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/fak-dev/fak/node/workspace"
)

// Entries for crafted manifests.
func dirEntry(p string) workspace.Entry {
	return workspace.Entry{Path: p, Type: workspace.TypeDir, Mode: 0o755}
}
func fileEntry(p string, size int64, chunks ...string) workspace.Entry {
	return workspace.Entry{Path: p, Type: workspace.TypeFile, Mode: 0o644, Size: size, Chunks: chunks}
}
func linkEntry(p, target string) workspace.Entry {
	return workspace.Entry{Path: p, Type: workspace.TypeSymlink, Mode: 0o777, Target: target}
}

// Crafted manifests are refused by Validate and by Materialize, which then
// writes nothing: not in the workspace, not beside it, not at the absolute
// path a manifest names.
func TestValidate_CraftedManifestsRefused(t *testing.T) {
	s, _ := openStore(t)
	data := []byte("hello")
	h := hashOf(data)
	if err := s.Put(h, data); err != nil {
		t.Fatal(err)
	}
	sandbox := t.TempDir()
	outside := filepath.Join(sandbox, "outside")
	ws := filepath.Join(sandbox, "ws")
	build(t, sandbox, dir("outside", 0o755), dir("ws", 0o700), file("ws/keep", "the old workspace", 0o644))
	before := listTree(t, sandbox)

	withMode := func(e workspace.Entry, mode uint32) workspace.Entry { e.Mode = mode; return e }
	withType := func(e workspace.Entry, typ string) workspace.Entry { e.Type = typ; return e }
	dirWithChunks := dirEntry("dir")
	dirWithChunks.Chunks = []string{h}
	fileWithTarget := fileEntry("f", 5, h)
	fileWithTarget.Target = "x"

	cases := map[string]struct {
		entries []workspace.Entry
		max     int64
	}{
		"absolute path":            {entries: []workspace.Entry{fileEntry(filepath.Join(outside, "pwned"), 5, h)}},
		"a/../../x":                {entries: []workspace.Entry{dirEntry("a"), fileEntry("a/../../x", 5, h)}},
		"..":                       {entries: []workspace.Entry{dirEntry("..")}},
		"../x":                     {entries: []workspace.Entry{fileEntry("../x", 5, h)}},
		"empty path":               {entries: []workspace.Entry{fileEntry("", 5, h)}},
		"dot":                      {entries: []workspace.Entry{dirEntry(".")}},
		"unclean a//b":             {entries: []workspace.Entry{dirEntry("a"), fileEntry("a//b", 5, h)}},
		"unclean ./a":              {entries: []workspace.Entry{fileEntry("./a", 5, h)}},
		"unclean trailing slash":   {entries: []workspace.Entry{dirEntry("a/")}},
		"NUL in path":              {entries: []workspace.Entry{fileEntry("a\x00b", 5, h)}},
		"invalid UTF-8 path":       {entries: []workspace.Entry{fileEntry("a\xff", 5, h)}},
		"unsorted":                 {entries: []workspace.Entry{fileEntry("b", 5, h), fileEntry("a", 5, h)}},
		"unsorted across dirs":     {entries: []workspace.Entry{dirEntry("a"), fileEntry("a/b", 5, h), fileEntry("a-b", 5, h)}},
		"duplicate":                {entries: []workspace.Entry{fileEntry("a", 5, h), fileEntry("a", 5, h)}},
		"duplicate file and dir":   {entries: []workspace.Entry{dirEntry("a"), fileEntry("a", 5, h)}},
		"child without parent":     {entries: []workspace.Entry{fileEntry("a/b", 5, h)}},
		"child of a file":          {entries: []workspace.Entry{fileEntry("a", 5, h), fileEntry("a/x", 5, h)}},
		"child through a symlink":  {entries: []workspace.Entry{linkEntry("d", "."), fileEntry("d/x", 5, h)}},
		"child through symlink up": {entries: []workspace.Entry{dirEntry("s"), linkEntry("s/up", ".."), fileEntry("s/up/x", 5, h)}},
		"symlink ../x":             {entries: []workspace.Entry{linkEntry("l", "../x")}},
		"symlink ..":               {entries: []workspace.Entry{linkEntry("l", "..")}},
		"symlink ../../x in a dir": {entries: []workspace.Entry{dirEntry("s"), linkEntry("s/l", "../../x")}},
		"symlink a/../../x":        {entries: []workspace.Entry{linkEntry("l", "a/../../x")}},
		"symlink absolute":         {entries: []workspace.Entry{linkEntry("l", "/etc/passwd")}},
		"symlink empty target":     {entries: []workspace.Entry{linkEntry("l", "")}},
		"symlink out via symlink":  {entries: []workspace.Entry{dirEntry("d"), linkEntry("d/up", ".."), linkEntry("esc", "d/up/..")}},
		"symlink out via chain":    {entries: []workspace.Entry{dirEntry("d"), dirEntry("d/e"), linkEntry("d/e/up", "../.."), linkEntry("d/in", "e/up"), linkEntry("esc", "d/in/../x")}},
		"symlink with a size":      {entries: []workspace.Entry{{Path: "l", Type: workspace.TypeSymlink, Mode: 0o777, Target: "x", Size: 5, Chunks: []string{h}}}},
		"no chunks for 5 bytes":    {entries: []workspace.Entry{fileEntry("f", 5)}},
		"one chunk for 1MiB+1":     {entries: []workspace.Entry{fileEntry("f", workspace.ChunkSize+1, h)}},
		"two chunks for 5 bytes":   {entries: []workspace.Entry{fileEntry("f", 5, h, h)}},
		"a chunk for 0 bytes":      {entries: []workspace.Entry{fileEntry("f", 0, h)}},
		"negative size":            {entries: []workspace.Entry{fileEntry("f", -1)}},
		"bad hash":                 {entries: []workspace.Entry{fileEntry("f", 5, "xyz")}},
		"uppercase hash":           {entries: []workspace.Entry{fileEntry("f", 5, strings.ToUpper(h))}},
		"path-like hash":           {entries: []workspace.Entry{fileEntry("f", 5, "../../../../etc/passwd/"+h[23:])}},
		"over max bytes":           {entries: []workspace.Entry{fileEntry("a", 5, h), fileEntry("b", 5, h)}, max: 9},
		"unknown type":             {entries: []workspace.Entry{withType(fileEntry("f", 5, h), "hardlink")}},
		"setuid":                   {entries: []workspace.Entry{withMode(fileEntry("f", 5, h), 0o4755)}},
		"sticky dir":               {entries: []workspace.Entry{withMode(dirEntry("d"), 0o1777)}},
		"dir with chunks":          {entries: []workspace.Entry{dirWithChunks}},
		"file with target":         {entries: []workspace.Entry{fileWithTarget}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			m := &workspace.Manifest{Entries: c.entries}
			t.Log(wantRefusal(t, workspace.Validate(m, c.max)))
			wantRefusal(t, workspace.Materialize(ws, m, s, c.max))
			sameTree(t, before, listTree(t, sandbox))
		})
	}
}

// What the refusals above must not catch: links inside the workspace
// (including to itself), through other links that stay inside, and loops
// (which the kernel resolves to nothing).
func TestValidate_Accepts(t *testing.T) {
	h := hashOf([]byte("hello"))
	ok := map[string][]workspace.Entry{
		"link to the root":       {linkEntry("d", ".")},
		"link inside via ..":     {dirEntry("s"), linkEntry("s/l", "../x")},
		"link through a dir ..":  {dirEntry("a"), linkEntry("l", "a/../b")},
		"link through a link":    {dirEntry("a"), dirEntry("a/b"), linkEntry("in", "a/b"), linkEntry("x", "in/../b")},
		"link loop":              {linkEntry("a", "b"), linkEntry("b", "a")},
		"file of 2 chunks":       {fileEntry("f", workspace.ChunkSize+1, h, h)},
		"empty file":             {fileEntry("f", 0)},
		"dir without owner bits": {{Path: "d", Type: workspace.TypeDir, Mode: 0o555}},
	}
	for name, entries := range ok {
		if err := workspace.Validate(&workspace.Manifest{Entries: entries}, 0); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := workspace.Validate(&workspace.Manifest{Entries: []workspace.Entry{fileEntry("f", 5, h)}}, 5); err != nil {
		t.Errorf("at max bytes: %v", err)
	}
}

// A manifest with "d" -> "." followed by "d/x" would write x into the
// workspace root through the symlink if it were followed: it is refused,
// and neither x nor d appears.
func TestMaterialize_NeverWritesThroughSymlink(t *testing.T) {
	s, _ := openStore(t)
	data := []byte("through the link")
	h := hashOf(data)
	if err := s.Put(h, data); err != nil {
		t.Fatal(err)
	}
	m := &workspace.Manifest{Entries: []workspace.Entry{linkEntry("d", "."), fileEntry("d/x", int64(len(data)), h)}}
	ws := filepath.Join(t.TempDir(), "ws")
	build(t, ws, file("keep", "x", 0o644))
	err := workspace.Materialize(ws, m, s, 0)
	if r := wantRefusal(t, err); r.Path != "d/x" {
		t.Fatalf("refused %q", r.Path)
	}
	if got := listTree(t, ws); len(got) != 1 || got["keep"] == "" {
		t.Fatalf("workspace now %v", got)
	}
}
