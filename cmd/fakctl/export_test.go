package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestExportAgainstARealFleet exports a session and its lineage from a
// one-node fleet: every event from #1, the reset that hid part of the
// history from the model notwithstanding, as JSON lines in lineage order
// and as one HTML page with every value escaped.
func TestExportAgainstARealFleet(t *testing.T) {
	fleet := oneNodeFleet(t)
	addr := fleet.Nodes[0].APIAddr
	ok := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, addr, args...)
		if code != exitOK || errOut != "" {
			t.Fatalf("%v: code %d stderr %q\nstdout:\n%s", args, code, errOut, out)
		}
		return out
	}
	root := strings.TrimSpace(ok("session", "create", "--title", "exported <b>", "--node", "elsewhere"))
	ok("session", "append", root, "--text", "before the reset <script>alert(1)</script>", "--data", `{"k":[1,2]}`)
	ok("session", "reset", root)
	ok("session", "append", root, "--text", "after the reset")
	m := regexp.MustCompile(`(?m)^Session: +(\S+) \(the new session, now in force\)$`).FindStringSubmatch(ok("session", "clear", root))
	if m == nil {
		t.Fatal("no child session from clear")
	}
	child := m[1]
	ok("session", "append", child, "--text", "in the child")

	// One session: all of it, from #1.
	lines := strings.Split(strings.TrimSpace(ok("session", "export", root)), "\n")
	var first, note exportLine
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Seq != 1 || first.SessionID != root || first.Kind != "session.created" {
		t.Fatalf("first line %q (%v)", lines[0], err)
	}
	for _, l := range lines {
		var e exportLine
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if strings.HasPrefix(e.Text, "before the reset") {
			note = e
		}
	}
	if note.Seq == 0 || string(note.Data) != `{"k":[1,2]}` || note.Summary == "" {
		t.Fatalf("the note the reset hid from the model: %+v", note)
	}

	// The lineage: the root's events, then the child's, each in order.
	var order []string
	var lastSeq uint64
	lastID := ""
	for _, l := range strings.Split(strings.TrimSpace(ok("session", "export", child, "--lineage", "-o", "jsonl")), "\n") {
		var e exportLine
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		if e.SessionID != lastID {
			order, lastID, lastSeq = append(order, e.SessionID), e.SessionID, 0
		}
		if e.Seq != lastSeq+1 {
			t.Fatalf("%s: #%d after #%d", e.SessionID, e.Seq, lastSeq)
		}
		lastSeq = e.Seq
	}
	if strings.Join(order, ",") != root+","+child {
		t.Fatalf("lineage order %v, want %s then %s", order, root, child)
	}

	// One page, every value escaped, both sessions linked.
	page := ok("session", "export", child, "--lineage", "-o", "html")
	for _, want := range []string{"<!DOCTYPE html>", `id="` + root + `"`, `id="` + child + `"`, "clear of <a href=\"#" + root + "\">",
		"exported &lt;b&gt;", "&lt;script&gt;alert(1)&lt;/script&gt;", "in the child"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>") {
		t.Error("the page carries a script tag")
	}
	if code, _, errOut := runCLI(t, addr, "session", "export", root, "-o", "pdf"); code != exitUsage || !strings.Contains(errOut, "want jsonl or html") {
		t.Errorf("-o pdf: code %d, %q", code, errOut)
	}
}
