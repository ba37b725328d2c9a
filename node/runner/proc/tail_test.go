package proc

import (
	"strings"
	"testing"
)

func TestTailKeepsTheLastLines(t *testing.T) {
	tl := &tail{}
	for i := 0; i < 1000; i++ {
		_, _ = tl.Write([]byte(strings.Repeat("x", 10) + "\n"))
	}
	_, _ = tl.Write([]byte("last words\n\n"))
	got := tl.String()
	lines := strings.Split(got, "\n")
	if len(lines) != tailLines || lines[len(lines)-1] != "last words" || !strings.HasPrefix(got, "…") {
		t.Fatalf("tail %q", got)
	}
	big := &tail{}
	_, _ = big.Write([]byte(strings.Repeat("y", 3*tailBytes)))
	if s := big.String(); len(s) > tailBytes+len("…") {
		t.Fatalf("tail of %d bytes", len(s))
	}
	if s := (&tail{}).String(); s != "" {
		t.Fatalf("empty tail %q", s)
	}
}
