package proc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrLineTooLong matches (errors.Is) what LineReader.Next returns for a
// line past the reader's bound; the error itself says the bound.
var ErrLineTooLong = errors.New("line too long")

// lineTooLong is ErrLineTooLong with the bound: "longer than 1048576 bytes
// (1 MiB)".
type lineTooLong struct{ max int }

func (e lineTooLong) Error() string {
	if e.max%(1<<20) == 0 {
		return fmt.Sprintf("longer than %d bytes (%d MiB)", e.max, e.max>>20)
	}
	return fmt.Sprintf("longer than %d bytes", e.max)
}

func (e lineTooLong) Is(target error) bool { return target == ErrLineTooLong }

// LineReader splits a process's stdout into lines, numbered from 1, each
// at most max bytes: a process writing without a newline fails the turn
// rather than fak's memory.
type LineReader struct {
	r   *bufio.Reader
	max int
	n   int // the number of the line last read
}

// NewLineReader reads r's lines of at most max bytes (without their end).
func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// N is the number of the line last read (0 before the first).
func (l *LineReader) N() int { return l.n }

// Next returns the next line without its end. The last line may lack a
// newline. A line longer than the bound is ErrLineTooLong, read no
// further: the turn ends there.
func (l *LineReader) Next() ([]byte, error) {
	var line []byte
	for {
		frag, err := l.r.ReadSlice('\n')
		if len(line)+len(frag) > l.max+2 { // room for "\r\n"
			l.n++
			return nil, lineTooLong{l.max}
		}
		line = append(line, frag...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
		case err != nil:
			return nil, err
		}
		l.n++
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > l.max {
			return nil, lineTooLong{l.max}
		}
		return line, nil
	}
}

// Discard reads the rest to its end and drops it: what a process writes
// after its last line that counts. It returns the bytes dropped.
func (l *LineReader) Discard() int64 {
	n, _ := io.Copy(io.Discard, l.r)
	return n
}

// EncodeLine marshals v as one JSON line for a process's stdin: JSON
// escapes every newline inside strings, the encoder ends the line, and
// HTML characters stay as they are.
func EncodeLine(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
