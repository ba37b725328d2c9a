package proc

import (
	"bytes"
	"strings"
	"sync"
)

// The stderr a failed turn reports: its last lines, bounded.
const (
	tailLines = 20
	tailBytes = 4 << 10
)

// tail keeps the end of a process's stderr: the last tailBytes, of which
// String gives the last tailLines lines. A chatty process (debug logs, a
// CLI's update notices) costs nothing more than that.
type tail struct {
	mu  sync.Mutex
	buf []byte
	cut bool // bytes before buf were dropped
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*tailBytes {
		// Drop in bulk, not on every write.
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailBytes:]...)
		t.cut = true
	}
	return len(p), nil
}

// String returns the last lines, trimmed, as valid UTF-8; "…" marks a
// first line that was cut.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, cut := t.buf, t.cut
	if len(b) > tailBytes {
		b, cut = b[len(b)-tailBytes:], true
	}
	b = bytes.TrimRight(b, " \t\r\n")
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > tailLines {
		lines, cut = lines[len(lines)-tailLines:], true
	}
	s := strings.ToValidUTF8(string(bytes.Join(lines, []byte("\n"))), "\uFFFD")
	s = strings.TrimLeft(s, " \t\r\n")
	if cut && s != "" {
		s = "…" + s
	}
	return s
}
