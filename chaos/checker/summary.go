package checker

import (
	"fmt"
	"strings"
)

// Summarize renders a checker's one-line verdict followed by its first five
// violations, the shape every checker's Summary shares.
func Summarize(name string, violations []string, counts string) string {
	var b strings.Builder
	verdict := "OK"
	if len(violations) > 0 {
		verdict = fmt.Sprintf("VIOLATED (%d)", len(violations))
	}
	fmt.Fprintf(&b, "%s: %s: %s", name, verdict, counts)
	for i, v := range violations {
		if i == 5 {
			fmt.Fprintf(&b, "\n  ... and %d more", len(violations)-5)
			break
		}
		b.WriteString("\n  " + v)
	}
	return b.String()
}
