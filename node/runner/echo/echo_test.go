package echo

import (
	"strings"
	"testing"
)

func TestParseTool(t *testing.T) {
	for _, tc := range []struct {
		in, tool, args string
		ok             bool
	}{
		{"!tool ls -la", "ls", "-la", true},
		{"!tool ls", "ls", "", true},
		{"!tool   grep -r  x ", "grep", "-r  x", true},
		{"!tool ", "", "", false},
		{"!tools ls", "", "", false},
		{"hello", "", "", false},
	} {
		tool, args, ok := parseTool(strings.TrimSpace(tc.in))
		if tool != tc.tool || args != tc.args || ok != tc.ok {
			t.Errorf("parseTool(%q) = %q, %q, %v; want %q, %q, %v", tc.in, tool, args, ok, tc.tool, tc.args, tc.ok)
		}
	}
}

func TestSplitKeepsTheReplyAndBoundsChunks(t *testing.T) {
	for _, s := range []string{"echo: hi", "echo: a  b", strings.Repeat("word ", 100) + "end"} {
		chunks := split(s, maxChunks)
		if strings.Join(chunks, "") != s {
			t.Errorf("split(%q) loses text: %q", s, chunks)
		}
		if len(chunks) < 2 || len(chunks) > maxChunks {
			t.Errorf("split(%q) gives %d chunks, want 2..%d", s, len(chunks), maxChunks)
		}
	}
}
