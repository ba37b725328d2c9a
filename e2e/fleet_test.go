package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fak-dev/fak/internal/freeport"
)

const (
	// stopGrace is how long an agent gets to exit after SIGTERM before it
	// is killed.
	stopGrace = 10 * time.Second
	// pollInterval is the pause between two checks of a condition.
	pollInterval = 100 * time.Millisecond
)

// binaries are the fak and fakctl executables under test.
type binaries struct {
	fak, fakctl string
}

// buildBinaries builds fak and fakctl into a fresh temporary directory, with
// -race when the test itself runs with -race.
func buildBinaries(t *testing.T) binaries {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/fak-dev/fak/cmd/fak", "github.com/fak-dev/fak/cmd/fakctl")
	start := time.Now()
	cmd := exec.Command("go", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("built fak and fakctl in %s (race=%v)", time.Since(start).Round(time.Millisecond), raceEnabled)
	exe := func(name string) string {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p + ".exe"); err == nil {
			p += ".exe"
		}
		return p
	}
	return binaries{fak: exe("fak"), fakctl: exe("fakctl")}
}

// freeAddrs returns n distinct loopback addresses whose port is free for
// both TCP and UDP (gossip uses both), outside the ephemeral port range so a
// restarted node can bind its port again.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs, err := freeport.Addrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// agent is one `fak agent` process, running or stopped. Its stdout and
// stderr go to logPath across restarts.
type agent struct {
	name                          string
	dataDir                       string
	apiAddr, raftAddr, gossipAddr string
	logPath                       string
	fakBin, tokenFile             string
	join                          []string
	bootstrapExpect               int

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed once the current process has exited
	waitErr error         // the current process's exit status, once done
	stopped bool          // the test stopped or killed it on purpose
}

// args is the agent's command line.
func (a *agent) args() []string {
	args := []string{
		"agent",
		"--name", a.name,
		"--data-dir", a.dataDir,
		"--api-addr", a.apiAddr,
		"--raft-addr", a.raftAddr,
		"--gossip-addr", a.gossipAddr,
		"--bootstrap-expect", fmt.Sprint(a.bootstrapExpect),
		"--token-file", a.tokenFile,
		"--log-level", "warn",
	}
	for _, j := range a.join {
		args = append(args, "--join", j)
	}
	return args
}

// start starts the agent process (again, after a kill, with the same data
// dir and addresses).
func (a *agent) start(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done != nil {
		select {
		case <-a.done:
		default:
			t.Fatalf("%s: start while running", a.name)
		}
	}
	logFile, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(logFile, "=== %s: %s %s\n", time.Now().Format(time.RFC3339Nano), a.fakBin, strings.Join(a.args(), " "))
	cmd := exec.Command(a.fakBin, a.args()...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	killWithParent(cmd)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start %s: %v", a.name, err)
	}
	done := make(chan struct{})
	a.cmd, a.done, a.waitErr, a.stopped = cmd, done, nil, false
	go func() {
		err := cmd.Wait()
		logFile.Close()
		a.mu.Lock()
		a.waitErr = err
		a.mu.Unlock()
		close(done)
	}()
}

// running reports whether the current process is alive.
func (a *agent) running() bool {
	a.mu.Lock()
	done := a.done
	a.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// exitedUnexpectedly reports the exit status of a process that ended
// although the test did not stop it.
func (a *agent) exitedUnexpectedly() (error, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done == nil || a.stopped {
		return nil, false
	}
	select {
	case <-a.done:
		return a.waitErr, true
	default:
		return nil, false
	}
}

// kill sends SIGKILL and waits for the process to exit.
func (a *agent) kill(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	cmd, done := a.cmd, a.done
	a.stopped = true
	a.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("kill %s: %v", a.name, err)
	}
	select {
	case <-done:
	case <-time.After(stopGrace):
		t.Fatalf("%s did not exit after SIGKILL", a.name)
	}
}

// stop sends SIGTERM, kills the process if it has not exited after
// stopGrace, and returns its exit status (nil for a clean exit).
func (a *agent) stop() (err error, clean bool) {
	a.mu.Lock()
	cmd, done := a.cmd, a.done
	wasStopped := a.stopped
	a.stopped = true
	a.mu.Unlock()
	if done == nil {
		return nil, true
	}
	select {
	case <-done:
		// Already exited: clean only if the test killed it on purpose.
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.waitErr, wasStopped || a.waitErr == nil
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.waitErr, a.waitErr == nil
	case <-time.After(stopGrace):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("still running %s after SIGTERM; killed", stopGrace), false
	}
}

// logText returns everything the agent has logged so far.
func (a *agent) logText() string {
	b, err := os.ReadFile(a.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(b)
}

// fleet is a set of agent processes and the fakctl to drive them.
type fleet struct {
	t      *testing.T
	bins   binaries
	token  string
	agents []*agent
	byName map[string]*agent
}

// startFleet starts n agents that bootstrap a cluster together. Each agent
// is stopped (SIGTERM, then SIGKILL after stopGrace) when the test ends,
// and on failure every agent's log is printed.
func startFleet(t *testing.T, bins binaries, n int) *fleet {
	t.Helper()
	dir := t.TempDir()
	f := &fleet{t: t, bins: bins, byName: make(map[string]*agent)}

	f.token = fmt.Sprintf("e2e-token-%d", time.Now().UnixNano())
	tokenFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokenFile, []byte("# e2e fleet\n"+f.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	addrs := freeAddrs(t, 3*n)
	var join []string
	for i := 0; i < n; i++ {
		join = append(join, addrs[3*i+2])
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("n%d", i+1)
		a := &agent{
			name:            name,
			dataDir:         filepath.Join(dir, name),
			apiAddr:         addrs[3*i],
			raftAddr:        addrs[3*i+1],
			gossipAddr:      addrs[3*i+2],
			logPath:         filepath.Join(dir, name+".log"),
			fakBin:          bins.fak,
			tokenFile:       tokenFile,
			join:            join,
			bootstrapExpect: n,
		}
		f.agents = append(f.agents, a)
		f.byName[name] = a
	}

	// Cleanups run last-in first-out: the agents stop first, then their
	// logs are checked and, on failure, printed.
	t.Cleanup(f.checkLogs)
	t.Cleanup(f.stopAll)
	for _, a := range f.agents {
		a.start(t)
	}
	return f
}

// stopAll stops every agent concurrently. An agent that does not exit
// cleanly on SIGTERM fails the test.
func (f *fleet) stopAll() {
	var wg sync.WaitGroup
	for _, a := range f.agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err, clean := a.stop(); !clean {
				f.t.Errorf("%s: did not shut down cleanly: %v", a.name, err)
			}
		}()
	}
	wg.Wait()
}

// checkLogs fails the test on a data race reported by an agent, and prints
// every agent's log when the test failed.
func (f *fleet) checkLogs() {
	for _, a := range f.agents {
		if strings.Contains(a.logText(), "WARNING: DATA RACE") {
			f.t.Errorf("%s: the race detector reported a data race (see its log)", a.name)
		}
	}
	if !f.t.Failed() {
		return
	}
	for _, a := range f.agents {
		f.t.Logf("----- log of %s (%s) -----\n%s----- end of %s log -----", a.name, a.logPath, a.logText(), a.name)
	}
}

// running lists the agents whose process is alive.
func (f *fleet) running() []*agent {
	var out []*agent
	for _, a := range f.agents {
		if a.running() {
			out = append(out, a)
		}
	}
	return out
}

// checkAlive fails the test at once if an agent the test did not stop has
// exited, rather than letting a wait time out.
func (f *fleet) checkAlive() {
	f.t.Helper()
	for _, a := range f.agents {
		if err, exited := a.exitedUnexpectedly(); exited {
			f.t.Fatalf("%s exited unexpectedly: %v", a.name, err)
		}
	}
}

// waitFor polls cond until it reports done or timeout passes; then the
// test fails with what and cond's last explanation of why it is not done.
func (f *fleet) waitFor(timeout time.Duration, what string, cond func() (done bool, why string)) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		f.checkAlive()
		done, why := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, why)
		}
		time.Sleep(pollInterval)
	}
}
