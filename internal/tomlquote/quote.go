// Package tomlquote writes TOML basic strings: what Codex's `-c key=value`
// overrides, which it parses as TOML values, need around a string (the
// guard's hooks and base URL, a provider runtime's gateway settings).
package tomlquote

import (
	"fmt"
	"strings"
)

// String is s as a TOML basic string: quoted, with quotes, backslashes and
// control characters escaped.
func String(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
