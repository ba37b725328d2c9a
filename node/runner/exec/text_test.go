package exec

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/node/runner/proc"
	"github.com/fak-dev/fak/node/runner/proc/proctest"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

// Output reaches the journal while the process still runs: the agent
// writes its second part only after the test has seen the first.
func TestTextStreamsOutputAsItArrives(t *testing.T) {
	t.Parallel()
	rt, ws := start(t, Options{Command: []string{testdata(t, "stream.sh")}}, nil, 0)
	tr := &runnertest.Turn{Input: 7}
	run := proctest.Go(t, rt, inputEvent(7, "hello"), tr)
	proctest.WaitFor(t, "the first part in the journal", func() bool { return strings.Contains(tr.Output(), "first: hello\n") })
	select {
	case r := <-run.Done():
		t.Fatalf("the turn ended before the agent could finish: %+v", r)
	default:
	}
	if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := run.Await(t, proctest.Patience)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := tr.Output(); got != "first: hello\nsecond\n" {
		t.Fatalf("output %q", got)
	}
	for _, ev := range tr.Events() {
		if ev.Kind != fsm.KindOutput {
			t.Fatalf("a text turn emitted %s", ev.Kind)
		}
	}
	if r.Res.Facts["exit_code"] != 0 || r.Res.Facts["pid"] == 0 {
		t.Fatalf("facts %v", r.Res.Facts)
	}
}

func TestTextShoutExample(t *testing.T) {
	t.Parallel()
	rt, _ := start(t, Options{Command: []string{example(t, "shout.sh")}}, nil, 0)
	tr := &runnertest.Turn{Input: 2}
	if _, err := proctest.RunTurn(t, rt, inputEvent(2, "hello\nfleet"), tr); err != nil {
		t.Fatal(err)
	}
	if got := tr.Output(); got != "HELLO\nFLEET\n" {
		t.Fatalf("output %q", got)
	}
}

// A non-zero exit fails the turn with the status and the last 20 lines of
// stderr; the output before it is journaled.
func TestTextNonZeroExitFailsWithTheStderrTail(t *testing.T) {
	t.Parallel()
	rt, _ := start(t, Options{Command: []string{testdata(t, "fail.sh")}}, nil, 0)
	tr := &runnertest.Turn{Input: 1}
	_, err := proctest.RunTurn(t, rt, inputEvent(1, "x"), tr)
	proctest.WantReason(t, err, ReasonExitStatus, "exit status 3", "complaint 11\n", "complaint 30")
	if strings.Contains(err.Error(), "complaint 10\n") {
		t.Fatalf("the tail holds more than the last 20 lines: %q", err)
	}
	if got := tr.Output(); got != "partial answer\n" {
		t.Fatalf("output %q", got)
	}
}

// Text is journaled as valid UTF-8 however the reads split it.
func TestTextStreamKeepsCharactersWhole(t *testing.T) {
	tr := &runnertest.Turn{}
	s := newTextStream(newOutput(tr))
	in := []byte("héllo → wörld")
	for i := range in {
		if err := s.write(in[i : i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.write([]byte{0xff, 'x', 0xe2, 0x86}); err != nil { // invalid, then a cut-off arrow
		t.Fatal(err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if got, want := tr.Output(), "héllo → wörld\uFFFDx\uFFFD"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
}

func TestIncompleteSuffix(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"abc", 0}, {"é", 0}, {"\xc3", 1}, {"a\xe2\x86", 2}, {"→", 0},
		{"\xf0\x9f\x98", 3}, {"😀", 0}, {"\x86", 0},
	} {
		if got := incompleteSuffix([]byte(tc.in)); got != tc.want {
			t.Errorf("incompleteSuffix(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// A lot of output arrives whole, in events of bounded size.
func TestTextLargeOutputIsJournaledInBoundedEvents(t *testing.T) {
	t.Parallel()
	const n = 600 << 10
	rt, _ := start(t, Options{Command: shell(fmt.Sprintf(`head -c %d /dev/zero | tr '\0' x`, n))}, nil, 0)
	tr := &runnertest.Turn{Input: 1}
	if _, err := proctest.RunTurn(t, rt, inputEvent(1, "x"), tr); err != nil {
		t.Fatal(err)
	}
	if got := tr.Output(); got != strings.Repeat("x", n) {
		t.Fatalf("%d bytes of output, want %d", len(got), n)
	}
	for _, ev := range tr.Events() {
		if len(ev.Text) > flushEvery {
			t.Fatalf("an output event of %d bytes", len(ev.Text))
		}
	}
}

// A process that escaped the group (setsid) and holds stdout open does
// not hold the turn: once the agent has exited, stdout is read until it
// is empty, then the turn ends.
func TestAnEscapedProcessDoesNotHoldTheTurn(t *testing.T) {
	t.Parallel()
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("no setsid")
	}
	rt, ws := start(t, Options{Command: shell(
		setsid+` sh -c 'echo $$ > escaped.tmp; mv escaped.tmp escaped; exec sleep 300' &`,
		`while [ ! -e escaped ]; do sleep 0.01; done`,
		`echo answer`,
	)}, nil, 0)
	tr := &runnertest.Turn{Input: 1}
	began := time.Now()
	_, err = proctest.RunTurn(t, rt, inputEvent(1, "x"), tr)
	pids := proctest.ReadPids(t, filepath.Join(ws, "escaped"))
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Output() != "answer\n" {
		t.Fatalf("output %q", tr.Output())
	}
	if d := time.Since(began); d > proc.DrainDelay+proctest.Promptly {
		t.Fatalf("the turn took %s", d)
	}
	if proctest.Gone(pids[0]) {
		t.Fatal("the escaped process died: this test proves nothing")
	}
}
