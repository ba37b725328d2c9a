package model

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Tool output goes into the journal (whose text must be UTF-8) and back to
// the model (whose context is finite), so it is made valid UTF-8 and cut
// to the configured size with a note saying how much is missing.

// capText keeps the first max bytes of s (cut at a rune boundary); total
// is the size of what s was read from.
func capText(s string, max int, total int64) string {
	if int64(len(s)) <= int64(max) && total <= int64(max) {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	head := runeHead(s, max)
	return strings.ToValidUTF8(head, "\uFFFD") + fmt.Sprintf("\n[output cut: the first %d of %d bytes are shown]", len(head), total)
}

// runeHead is the longest prefix of s of at most n bytes that does not
// end inside a rune.
func runeHead(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// trimRunes drops the bytes of a rune cut at either end of s: the
// continuation bytes it starts with and an unfinished rune it ends with.
func trimRunes(s string) string {
	for i := 0; i < utf8.UTFMax && len(s) > 0 && !utf8.RuneStart(s[0]); i++ {
		s = s[1:]
	}
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				s = s[:i]
			}
			break
		}
	}
	return s
}

// capWriter keeps the head and the tail of a stream, half the cap each:
// a command's first lines say what it did, its last ones how it ended.
type capWriter struct {
	half  int
	head  []byte
	tail  []byte
	total int64
}

func newCapWriter(max int) *capWriter { return &capWriter{half: max / 2} }

func (w *capWriter) Write(p []byte) (int, error) {
	n := len(p)
	w.total += int64(n)
	if room := w.half - len(w.head); room > 0 {
		k := min(room, len(p))
		w.head = append(w.head, p[:k]...)
		p = p[k:]
	}
	w.tail = append(w.tail, p...)
	if len(w.tail) > 2*w.half {
		w.tail = append([]byte(nil), w.tail[len(w.tail)-w.half:]...)
	}
	return n, nil
}

// String is the output, cut in the middle when it exceeded the cap.
func (w *capWriter) String() string {
	if w.total <= int64(2*w.half) {
		return strings.ToValidUTF8(string(w.head)+string(w.tail), "\uFFFD")
	}
	head := trimRunes(string(w.head))
	tail := trimRunes(string(w.tail[len(w.tail)-w.half:]))
	cut := w.total - int64(len(head)) - int64(len(tail))
	return strings.ToValidUTF8(head, "\uFFFD") +
		fmt.Sprintf("\n[output cut: %d of %d bytes left out here]\n", cut, w.total) +
		strings.ToValidUTF8(tail, "\uFFFD")
}
