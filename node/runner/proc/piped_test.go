package proc

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fak-dev/fak/node/runner"
)

func startSh(t *testing.T, script string, o StartOptions) *Piped {
	t.Helper()
	pr, err := Start(context.Background(), Spec{Argv: []string{"sh", "-c", script}, Dir: t.TempDir(), Env: Env()}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pr.Stop)
	return pr
}

func wantTurnError(t *testing.T, err error, reason, msg string) {
	t.Helper()
	var te *runner.TurnError
	if !errors.As(err, &te) || te.Reason != reason || te.Err.Error() != msg {
		t.Fatalf("error %v, want %s: %s", err, reason, msg)
	}
}

// What is sent reaches stdin in order; stdout is read to its end.
func TestPipedSendAndRead(t *testing.T) {
	pr := startSh(t, "cat", StartOptions{Stdin: true, Reason: "X"})
	pr.Send([]byte("one\n"))
	pr.Send([]byte("two\n"))
	pr.CloseStdin()
	out, err := io.ReadAll(pr)
	if err != nil || string(out) != "one\ntwo\n" {
		t.Fatalf("stdout %q %v", out, err)
	}
	if !pr.WaitExit(time.Minute) {
		t.Fatal("cat was killed")
	}
	if err := pr.ExitStatus("X", "after done"); err != nil {
		t.Fatal(err)
	}
	if pr.Pid() == 0 {
		t.Fatal("no pid")
	}
}

// Without Stdin the process reads /dev/null, and Send drops what it gets.
func TestPipedWithoutStdin(t *testing.T) {
	pr := startSh(t, "cat; echo end", StartOptions{Reason: "X"})
	pr.Send([]byte("dropped\n"))
	out, err := io.ReadAll(pr)
	if err != nil || string(out) != "end\n" {
		t.Fatalf("stdout %q %v", out, err)
	}
}

// A failed exit carries the status, what the caller says and the tail of
// stderr, with the caller's reason.
func TestPipedExitStatus(t *testing.T) {
	pr := startSh(t, "echo warming up >&2; echo broke >&2; exit 3", StartOptions{Reason: "X"})
	<-pr.Exited()
	wantTurnError(t, pr.ExitStatus("SOME_EXIT", "before done"), "SOME_EXIT", "exit status 3 before done: warming up\nbroke")

	pr = startSh(t, "exit 1", StartOptions{Reason: "X"})
	<-pr.Exited()
	wantTurnError(t, pr.ExitStatus("SOME_EXIT", ""), "SOME_EXIT", "exit status 1 (nothing on stderr)")
}

// A process killed after grace did not exit by itself.
func TestPipedWaitExitKills(t *testing.T) {
	pr := startSh(t, "sleep 300", StartOptions{Reason: "X"})
	if pr.WaitExit(10 * time.Millisecond) {
		t.Fatal("sleep exited by itself")
	}
	err := pr.ExitStatus("SOME_EXIT", "")
	if err == nil || !strings.Contains(err.Error(), "killed by signal killed") {
		t.Fatalf("error %v", err)
	}
}

// A refused Spec and a command that cannot run fail with the caller's
// reason; the hint follows why the command cannot run.
func TestStartFailures(t *testing.T) {
	_, err := Start(context.Background(), Spec{}, StartOptions{Reason: "NO_START", Hint: "install it"})
	wantTurnError(t, err, "NO_START", "no command")

	_, err = Start(context.Background(), Spec{Argv: []string{"/nonexistent/cli"}, Dir: t.TempDir()},
		StartOptions{Stdin: true, Reason: "NO_START", Hint: "install it"})
	wantTurnError(t, err, "NO_START", `cannot start "/nonexistent/cli": fork/exec /nonexistent/cli: no such file or directory (install it)`)
}

// The timeout ends the turn with the caller's reason; the turn's own
// cancellation returns ctx's error.
func TestTimedTurn(t *testing.T) {
	wait := func(tctx context.Context) (runner.TurnResult, error) {
		<-tctx.Done()
		return runner.TurnResult{}, tctx.Err()
	}
	_, err := TimedTurn(context.Background(), 10*time.Millisecond, "TOO_LONG", wait)
	wantTurnError(t, err, "TOO_LONG", "the turn ran past its timeout of 10ms; its process group was killed")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := TimedTurn(ctx, time.Minute, "TOO_LONG", wait); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

func TestCheckSandbox(t *testing.T) {
	for _, mode := range []string{"", SandboxNone} {
		if err := CheckSandbox(mode); err != nil {
			t.Errorf("%q: %v", mode, err)
		}
	}
	if err := CheckSandbox("docker"); err == nil || err.Error() != `unknown sandbox "docker" (write "none" or "bwrap")` {
		t.Errorf("docker: %v", err)
	}
}

func TestTurnEnv(t *testing.T) {
	got := TurnEnv(runner.Epoch{SessionID: "s1", Epoch: 3, Addr: "a:1", Workspace: "/w"}, 9)
	want := "FAK_SESSION_ID=s1 FAK_EPOCH=3 FAK_INPUT_SEQ=9 FAK_ADDR=a:1 FAK_WORKSPACE=/w"
	if strings.Join(got, " ") != want {
		t.Fatalf("env %v", got)
	}
}
