package provider

import "strings"

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
