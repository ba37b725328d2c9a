package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// fakctlTimeout bounds one fakctl invocation; fakctl's own unary timeout is
// 10s, so this only catches a hung process.
const fakctlTimeout = 30 * time.Second

// result is the outcome of one fakctl invocation.
type result struct {
	args           []string
	code           int // exit code; -1 if fakctl did not exit by itself
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("fakctl %s: exit %d\nstdout: %q\nstderr: %q",
		strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// ok reports whether fakctl exited 0 with nothing on stderr, as every
// successful command should.
func (r result) ok() bool { return r.code == 0 && r.stderr == "" }

// fakctlEnv is the environment minus anything that would point fakctl at
// another fleet or token than the test gives it. A -race binary sleeps 1s
// at exit by default (for late race reports); fakctl runs hundreds of
// times, so it is told not to.
func fakctlEnv() []string {
	var env []string
	gorace := "atexit_sleep_ms=0"
	for _, kv := range os.Environ() {
		if v, ok := strings.CutPrefix(kv, "GORACE="); ok {
			gorace = strings.TrimSpace(v + " " + gorace)
			continue
		}
		if !strings.HasPrefix(kv, "FAK_") {
			env = append(env, kv)
		}
	}
	return append(env, "GORACE="+gorace)
}

// fakctl runs fakctl against agent a with the fleet's token, plus args.
func (f *fleet) fakctl(a *agent, args ...string) result {
	return f.fakctlToken(a, f.token, args...)
}

// fakctlToken runs fakctl against agent a with the given token.
func (f *fleet) fakctlToken(a *agent, token string, args ...string) result {
	args = append([]string{"--addr", "http://" + a.apiAddr, "--token", token}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), fakctlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.bins.fakctl, args...)
	cmd.Env = fakctlEnv()
	cmd.Dir = f.t.TempDir() // no .fak-dev/token to find by accident
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr) && ctx.Err() == nil:
		r.code = exitErr.ExitCode()
	default:
		r.code = -1
		r.stderr += fmt.Sprintf("\n(test harness: %v)", err)
	}
	return r
}

// mustFakctl runs fakctl and fails the test unless it succeeds.
func (f *fleet) mustFakctl(a *agent, args ...string) string {
	f.t.Helper()
	r := f.fakctl(a, args...)
	if !r.ok() {
		f.t.Fatalf("on %s: %v", a.name, r)
	}
	return r.stdout
}

// unmarshal decodes fakctl's protojson output into msg.
func unmarshal(out string, msg proto.Message) error {
	if err := protojson.Unmarshal([]byte(out), msg); err != nil {
		return fmt.Errorf("decode %T from %q: %w", msg, out, err)
	}
	return nil
}

// parseEvents decodes `session log -o json` output: one event per line.
func parseEvents(out string) ([]*fakv1.Event, error) {
	var events []*fakv1.Event
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		ev := &fakv1.Event{}
		if err := unmarshal(line, ev); err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	return events, nil
}

// status asks agent a for the Raft status of every alive member.
func (f *fleet) status(a *agent) (*fakv1.StatusResponse, error) {
	r := f.fakctl(a, "cluster", "status", "-o", "json")
	if !r.ok() {
		return nil, errors.New(r.String())
	}
	st := &fakv1.StatusResponse{}
	return st, unmarshal(r.stdout, st)
}

// agreedLeader asks every agent in among for the cluster status and returns
// the leader they all agree on, which must itself be in among and report
// itself the Raft leader. why explains a missing leader.
func (f *fleet) agreedLeader(among []*agent) (leader *agent, why string) {
	leaderID := ""
	for _, a := range among {
		st, err := f.status(a)
		if err != nil {
			return nil, fmt.Sprintf("status from %s: %v", a.name, err)
		}
		for _, n := range st.GetNodes() {
			if !containsAgent(among, n.GetName()) {
				continue // not expected to be up, or not asked about
			}
			switch {
			case n.GetError() != "":
				return nil, fmt.Sprintf("%s says %s: %s", a.name, n.GetName(), n.GetError())
			case n.GetLeaderId() == "":
				return nil, fmt.Sprintf("%s says %s knows no leader", a.name, n.GetName())
			case leaderID == "":
				leaderID = n.GetLeaderId()
			case n.GetLeaderId() != leaderID:
				return nil, fmt.Sprintf("leaders disagree: %s and %s", leaderID, n.GetLeaderId())
			}
			if n.GetName() == leaderID && n.GetRaftState() != "Leader" {
				return nil, fmt.Sprintf("%s is named leader but is %s", leaderID, n.GetRaftState())
			}
		}
	}
	for _, a := range among {
		if a.name == leaderID {
			return a, ""
		}
	}
	if leaderID == "" {
		return nil, "no status named a leader"
	}
	return nil, fmt.Sprintf("leader %s is not among the expected nodes", leaderID)
}

func containsAgent(agents []*agent, name string) bool {
	for _, a := range agents {
		if a.name == name {
			return true
		}
	}
	return false
}

// members asks agent a for the gossip members, by name.
func (f *fleet) members(a *agent) (map[string]*fakv1.Member, error) {
	r := f.fakctl(a, "cluster", "members", "-o", "json")
	if !r.ok() {
		return nil, errors.New(r.String())
	}
	resp := &fakv1.MembersResponse{}
	if err := unmarshal(r.stdout, resp); err != nil {
		return nil, err
	}
	out := make(map[string]*fakv1.Member)
	for _, m := range resp.GetMembers() {
		out[m.GetName()] = m
	}
	return out, nil
}
