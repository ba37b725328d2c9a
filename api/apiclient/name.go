package apiclient

import (
	"os"
	"os/user"
)

// ClientName is how a person's client names itself when it attaches:
// user@host. getenv reads USER (os.Getenv, or a test's).
func ClientName(getenv func(string) string) string {
	name := getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if name == "" {
		name = "user"
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		name += "@" + host
	}
	return name
}
