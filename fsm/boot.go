package fsm

import (
	"os"
	"strings"
)

// bootID names this boot of the machine's kernel. The database is written
// without fsync, so its writes live in the kernel's page cache until the
// kernel writes them back, and the page cache lasts exactly as long as a
// boot: a process that dies (SIGKILL, a panic, the OOM killer) loses none
// of them, a machine that stops may lose any. "" where the boot cannot be
// told apart (then a database not shut down cleanly is never kept). A
// variable so tests can be another boot.
var bootID = func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
