package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// The trial of issue 32 §3, with processes: one agent's data dir on a
// 32 MiB tmpfs that fills. The agent ends with one line saying what, where
// and how much room — exit code 2, no stack trace — the other two serve
// on, restarted on the still-full disk it is never ready, and once room is
// freed it catches up and is ready. Root only (it mounts; CI runs as root).
func TestProcessDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fak and fakctl and runs a three-node fleet of processes; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	mnt := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	bins := buildBinaries(t)
	f := startFleet(t, bins, 3)
	leader := f.waitForLeader(f.agents)
	var full, other *agent
	for _, a := range f.agents {
		switch {
		case a == leader:
		case full == nil:
			full = a
		default:
			other = a
		}
	}
	// Runs before the fleet's cleanups: the agent off the tmpfs first.
	t.Cleanup(func() {
		full.stop()
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})

	// Move the follower's data dir onto the tmpfs.
	if err, clean := full.stop(); !clean {
		t.Fatalf("stop %s: %v", full.name, err)
	}
	if out, err := exec.Command("cp", "-a", full.dataDir+"/.", mnt).CombinedOutput(); err != nil {
		t.Fatalf("copy %s's data dir: %v: %s", full.name, err, out)
	}
	full.dataDir = mnt
	full.start(t)
	waitReady(t, f, full, http.StatusOK, "ready")

	out := f.mustFakctl(leader, "session", "create", "--title", "disk", "-o", "json")
	session := &fakv1.Session{}
	if err := unmarshal(out, session); err != nil {
		t.Fatal(err)
	}
	id := session.GetSessionId()
	appended := 0
	appendVia := func(a *agent) {
		t.Helper()
		text := fmt.Sprintf("event %d %s", appended, strings.Repeat("x", 8<<10))
		if r := f.fakctl(a, "session", "append", id, "--text", text, "-o", "json"); !r.ok() {
			t.Fatalf("append %d through %s with %s's disk full: %v", appended, a.name, full.name, r)
		}
		appended++
	}

	filler := fillDisk(t, mnt)
	deadline := time.Now().Add(60 * time.Second)
	for full.running() {
		if time.Now().After(deadline) {
			t.Fatalf("%s still running 60 s after its disk filled (%d appends)", full.name, appended)
		}
		appendVia(leader)
	}
	full.mu.Lock()
	full.stopped = true // it was meant to exit; the fleet's checks skip it
	exitErr := full.waitErr
	full.mu.Unlock()
	var ee *exec.ExitError
	if !errors.As(exitErr, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("%s exited with %v, want exit status 2", full.name, exitErr)
	}
	line := checkFullLine(t, full.logText(), mnt)
	t.Logf("%s exited 2 after %d appends: %s", full.name, appended, line)

	// The fleet serves on.
	for i := 0; i < 5; i++ {
		appendVia(leader)
		appendVia(other)
	}
	waitReady(t, f, other, http.StatusOK, "ready")

	// Restarted on the still-full disk: never ready. It ends again with the
	// line at its first failing store, or stays up answering 503.
	logBefore := len(full.logText())
	full.start(t)
	appendVia(leader)
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) && full.running() {
		if code, body := ready(full); code == http.StatusOK {
			t.Fatalf("%s on a full disk says ready: %v", full.name, body)
		}
		time.Sleep(pollInterval)
	}
	full.mu.Lock()
	full.stopped = true
	full.mu.Unlock()
	if !full.running() {
		restartLog := full.logText()[logBefore:]
		if !strings.Contains(restartLog, "no space left on device") || strings.Contains(restartLog, "goroutine ") {
			t.Fatalf("%s restarted on a full disk exited without the line, or with a stack trace:\n%s", full.name, restartLog)
		}
		t.Logf("%s restarted on the full disk exited: %v", full.name, lastLine(restartLog))
	} else {
		full.stop()
	}

	// Room again: it catches up.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	full.start(t)
	waitReady(t, f, full, http.StatusOK, "ready")
	out = f.mustFakctl(full, "session", "log", id, "-o", "json")
	events, err := parseEvents(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 + appended; len(events) != want {
		t.Fatalf("%s's journal after catching up: %d events, want %d", full.name, len(events), want)
	}
}

// fillDisk writes a file in dir until the file system is full.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := fh.Write(buf); err != nil {
			break
		}
	}
	for n := len(buf) / 2; n > 0; n /= 2 {
		for {
			if _, err := fh.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	return p
}

// checkFullLine: the log holds exactly one line naming the full disk, what
// and where, with its figures, and no stack trace.
func checkFullLine(t *testing.T, log, dir string) string {
	t.Helper()
	var found []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "storage full: cannot write ") {
			found = append(found, l)
		}
	}
	if len(found) != 1 || !strings.Contains(found[0], "[ERROR]") || !strings.Contains(found[0], " in "+dir) ||
		!strings.Contains(found[0], ": no space left on device (") || !strings.Contains(found[0], " free of 32 MiB)") {
		t.Fatalf("want one error line \"storage full: cannot write … in %s: no space left on device (… free of 32 MiB)\"; got %q", dir, found)
	}
	if strings.Contains(log, "goroutine ") || strings.Contains(log, "panic") {
		t.Fatalf("a stack trace in the log:\n%s", log)
	}
	return found[0]
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// ready is GET /v1/health/ready of an agent: its code and body (0 when it
// does not answer).
func ready(a *agent) (int, map[string]any) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + a.apiAddr + "/v1/health/ready")
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func waitReady(t *testing.T, f *fleet, a *agent, code int, status string) {
	t.Helper()
	f.waitFor(60*time.Second, a.name+" "+status, func() (bool, string) {
		c, body := ready(a)
		return c == code && body["status"] == status, fmt.Sprintf("HTTP %d %v", c, body)
	})
}
