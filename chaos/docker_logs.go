package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// A docker fleet's node logs are the containers' logs (`docker logs`),
// saved into the run's directory.

// Logs saves each container's log (all its runs so far) to <Dir>/nX.log
// and returns those paths; Close saves them once more, complete, and
// after Close they are left as they are.
func (f *dockerFleet) Logs() []string {
	f.closeMu.Lock()
	if !f.closed {
		if err := f.saveLogs(); err != nil {
			f.logger.Warn("saving container logs", "error", err)
		}
	}
	f.closeMu.Unlock()
	out := make([]string, len(f.nodes))
	for i, n := range f.nodes {
		out[i] = n.logPath
	}
	return out
}

func (f *dockerFleet) saveLogs() error {
	var errs []error
	for _, n := range f.nodes {
		errs = append(errs, saveContainerLog(n.container, n.logPath))
	}
	return errors.Join(errs...)
}

// saveContainerLog writes `docker logs` of container to path (fak logs to
// stderr; both streams go to the one file). It writes a temporary file
// first so that a failure leaves an earlier copy in place.
func saveContainerLog(container, path string) error {
	tmp := path + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp) // after the rename, a no-op
	ctx, cancel := context.WithTimeout(context.Background(), dockerCmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "logs", container)
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// Docker's complaint is the last line written.
		b, _ := os.ReadFile(tmp)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		return fmt.Errorf("docker logs %s: %w: %s", container, err, lines[len(lines)-1])
	}
	return os.Rename(tmp, path)
}

// logTail is the last lines of container's log, both streams.
func logTail(container string, lines int) string {
	ctx, cancel := context.WithTimeout(context.Background(), dockerCmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "logs", "--tail", strconv.Itoa(lines), container).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(docker logs: %v: %s)", err, out)
	}
	return strings.TrimSpace(string(out))
}
