package runner

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplitTextKeepsRunesWhole(t *testing.T) {
	s := strings.Repeat("é", 100) // 2 bytes each
	pieces := splitText([]byte(s), 7)
	if strings.Join(pieces, "") != s {
		t.Fatal("pieces do not join back")
	}
	for _, p := range pieces {
		if len(p) > 7 || !utf8.ValidString(p) {
			t.Fatalf("piece %q", p)
		}
	}
}
