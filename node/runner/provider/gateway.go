package provider

import (
	"fmt"
	"strings"
)

// traceHeader names the session a gateway call is charged to.
const traceHeader = "X-Trace-Id"

// headerValue makes s safe as one HTTP header value in an environment
// variable the CLI turns into headers: no line break can add a header.
func headerValue(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// tomlString quotes s as a TOML basic string, for codex's -c overrides,
// which it parses as TOML values.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
