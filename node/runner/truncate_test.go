package runner_test

import (
	"testing"

	"github.com/fak-dev/fak/node/runner"
)

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"}, {"abcdef", 3, "abc…"}, {"ééé", 3, "é…"}, {"ééé", 4, "éé…"},
	} {
		if got := runner.Truncate(tc.in, tc.n); got != tc.want {
			t.Errorf("runner.Truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
