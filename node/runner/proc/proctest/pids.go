package proctest

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// WaitFor polls cond until it holds; past Patience the test fails.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ReadPids reads the pids a test's process recorded in path, separated
// by white space, waiting for the file to appear: a process recording
// several writes them elsewhere and renames the file into place.
func ReadPids(t testing.TB, path string) []int {
	t.Helper()
	var b []byte
	WaitFor(t, path, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil
	})
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		t.Fatalf("%s holds no pids", path)
	}
	return pids
}

// Gone reports whether pid has exited: no such process, or a zombie
// waiting for init to reap it.
func Gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command, which is in parentheses and may hold
	// spaces: "pid (comm) S ...".
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// WantAllDead fails unless every pid is gone Promptly: a SIGKILLed
// process takes a moment to finish exiting, never longer.
func WantAllDead(t testing.TB, pids []int) {
	t.Helper()
	deadline := time.Now().Add(Promptly)
	for _, pid := range pids {
		for !Gone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d of the turn's group outlived the turn", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
