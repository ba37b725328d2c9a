package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
)

// flushEvery bounds the output waiting for the journal: at this much text
// the turn waits for it to be journaled before reading more, so a process
// writing faster than the cluster commits is slowed down instead of piling
// up text in memory and in one event past the API's size limit.
const flushEvery = 64 << 10

// textTurn: the input on stdin, stdout streamed as output, the exit status
// decides.
func (rt *runtime) textTurn(ctx, tctx context.Context, in *fsmpb.Event, t runner.Turn) (runner.TurnResult, error) {
	// Deferred first, so it runs last: the group is dead before the
	// output left is journaled.
	out := newTextStream(runner.NewOutput(ctx, t))
	defer out.close()
	pr, err := startProcess(tctx, rt.spec(in))
	if err != nil {
		return runner.TurnResult{}, err
	}
	defer pr.Stop()
	input := in.Text
	if !strings.HasSuffix(input, "\n") {
		input += "\n" // so that a line-reading program sees its last line
	}
	pr.Send([]byte(input))
	pr.CloseStdin()

	buf := make([]byte, 32<<10)
	for {
		n, err := pr.Read(buf)
		if werr := out.write(buf[:n]); werr != nil {
			return runner.TurnResult{}, werr
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return runner.TurnResult{}, fmt.Errorf("reading the process's stdout: %w", err)
		}
	}
	<-pr.Exited() // a process that closed stdout early ends by the turn timeout
	if err := pr.ExitStatus(ReasonExitStatus, ""); err != nil {
		if cerr := out.close(); cerr != nil {
			return runner.TurnResult{}, cerr
		}
		return runner.TurnResult{}, err
	}
	// The last text goes out with turn.completed, in one write.
	tail, err := out.detach()
	if err != nil {
		return runner.TurnResult{}, err
	}
	return runner.TurnResult{Facts: map[string]any{"exit_code": 0, "pid": pr.Pid()}, Tail: tail}, nil
}

// textStream turns a byte stream into output text: valid UTF-8 (a
// character split between two reads is kept whole, invalid bytes become
// U+FFFD) written to a runner.Output, which coalesces it.
type textStream struct {
	out     *runner.Output
	partial []byte // the start of a character the next read completes
	since   int    // bytes written since the last flush
	closed  bool
	err     error
}

func newTextStream(out *runner.Output) *textStream { return &textStream{out: out} }

func (s *textStream) write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	b = append(s.partial, b...)
	s.partial = nil
	if cut := incompleteSuffix(b); cut > 0 {
		s.partial = append([]byte(nil), b[len(b)-cut:]...)
		b = b[:len(b)-cut]
	}
	text := strings.ToValidUTF8(string(b), "\uFFFD")
	if s.since > 0 && s.since+len(text) > flushEvery {
		// What waits goes first, so no event grows past flushEvery
		// but for a single larger write.
		if err := s.flush(); err != nil {
			return err
		}
	}
	if err := s.out.Write(text); err != nil {
		return err
	}
	if s.since += len(text); s.since >= flushEvery {
		return s.flush()
	}
	return nil
}

// flush journals everything written so far; the runtime calls it before
// emitting any other event.
func (s *textStream) flush() error {
	s.since = 0
	return s.out.Flush()
}

// close writes what is left (a truncated character as U+FFFD) and stops
// the output writer. Later calls return the first one's result.
func (s *textStream) close() error {
	if s.closed {
		return s.err
	}
	s.closed = true
	if len(s.partial) > 0 {
		_ = s.out.Write(strings.ToValidUTF8(string(s.partial), "\uFFFD"))
		s.partial = nil
	}
	s.err = s.out.Close()
	return s.err
}

// detach stops the output writer without writing what is left, and
// returns it (a truncated character as U+FFFD) for the runner to journal
// with turn.completed. Later close calls return its error.
func (s *textStream) detach() (string, error) {
	if s.closed {
		return "", s.err
	}
	s.closed = true
	tail, err := s.out.Detach()
	if len(s.partial) > 0 {
		tail += strings.ToValidUTF8(string(s.partial), "\uFFFD")
		s.partial = nil
	}
	s.err = err
	return tail, err
}

// incompleteSuffix is the length of a UTF-8 character started at the end
// of b but not finished (0 if none).
func incompleteSuffix(b []byte) int {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < utf8.RuneSelf {
			return 0 // ASCII: nothing is pending
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(b[len(b)-i:]) {
				return 0
			}
			return i
		}
	}
	return 0
}
