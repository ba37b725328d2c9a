// Package deploy_test puts the compose fleet of deploy/ through its paces:
// the image, the secrets script, the secured fleet, fakctl against its
// published ports, the loss of the leader's container and the cleanup.
package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// composeTimeout bounds the whole test: build, start, drive, stop, clean.
const composeTimeout = 6 * time.Minute

func TestComposeFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image and starts containers")
	}
	compose := composeTool()
	if compose == nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no Docker engine with compose answers (CI=true: .ci/run should have started one)")
		}
		t.Skip("no Docker engine with compose")
	}
	ctx, cancel := context.WithTimeout(context.Background(), composeTimeout)
	defer cancel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, ctx: ctx, root: root, compose: compose, project: fmt.Sprintf("faktest%d", os.Getpid())}
	f.build()
	f.secrets()
	f.up()

	// Security: no client certificate, no connection; a read token cannot
	// create a session.
	if out, err := f.fakctl(f.ports[0], map[string]string{"FAK_CLIENT_CERT": "", "FAK_CLIENT_KEY": ""}, "cluster", "status"); err == nil {
		t.Errorf("fakctl without a client certificate succeeded:\n%s", out)
	}
	if out, err := f.fakctl(f.ports[0], map[string]string{"FAK_TOKEN": f.tokens["read"]}, "session", "create", "--title", "denied"); err == nil || !strings.Contains(strings.ToLower(out), "operator") && !strings.Contains(strings.ToLower(out), "agent") {
		t.Errorf("a read token created a session (err %v):\n%s", err, out)
	}

	var created struct {
		SessionID string `json:"sessionId"`
	}
	f.fakctlJSON(f.ports[1], &created, "session", "create", "--title", "compose", "--node", "n2")
	id := created.SessionID
	if id == "" {
		t.Fatal("session create printed no session id")
	}
	var acked []string
	for i := range 20 {
		text := fmt.Sprintf("event-%02d", i)
		if _, err := f.fakctl(f.ports[i%3], nil, "session", "append", id, "--text", text); err != nil {
			t.Fatalf("append %s: %v", text, err)
		}
		acked = append(acked, text)
	}

	leader := f.leader(f.ports[0])
	t.Logf("leader %s; stopping its container", leader)
	f.run(nil, append(f.composeArgs(), "stop", leader)...)
	var live []string
	for i, n := range []string{"n1", "n2", "n3"} {
		if n != leader {
			live = append(live, f.ports[i])
		}
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		if l := f.leaderOrEmpty(live[0]); l != "" && l != leader {
			t.Logf("new leader %s", l)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new leader within 90s after stopping %s", leader)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if _, err := f.fakctl(live[1], nil, "session", "append", id, "--text", "after-leader-loss"); err != nil {
		t.Fatalf("append after leader loss: %v", err)
	}
	acked = append(acked, "after-leader-loss")
	for _, port := range live {
		out, err := f.fakctl(port, nil, "session", "log", id)
		if err != nil {
			t.Fatalf("session log via %s: %v", port, err)
		}
		for _, text := range acked {
			if !strings.Contains(out, text) {
				t.Errorf("acknowledged event %q missing from the log served on port %s", text, port)
			}
		}
	}

	f.down()
	for _, args := range [][]string{
		{"ps", "-aq", "--filter", "label=com.docker.compose.project=" + f.project},
		{"volume", "ls", "-q", "--filter", "label=com.docker.compose.project=" + f.project},
		{"network", "ls", "-q", "--filter", "label=com.docker.compose.project=" + f.project},
	} {
		if out := strings.TrimSpace(f.run(nil, append([]string{"docker"}, args...)...)); out != "" {
			t.Errorf("docker %s still lists %q after down", args[0], out)
		}
	}
}

// fleet is one compose project of the test.
type fleet struct {
	t       *testing.T
	ctx     context.Context
	root    string
	compose []string
	project string

	bin, secretsDir, image, subnet string
	ports                          []string
	tokens                         map[string]string
	downDone                       bool
}

func (f *fleet) build() {
	f.bin = f.t.TempDir()
	for _, cmd := range []string{"fak", "fakctl"} {
		c := exec.CommandContext(f.ctx, "go", "build", "-o", filepath.Join(f.bin, cmd), "./cmd/"+cmd)
		c.Dir, c.Env = f.root, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := c.CombinedOutput(); err != nil {
			f.t.Fatalf("go build %s: %v\n%s", cmd, err, out)
		}
	}
	f.image = "fak:" + f.project
	f.run(nil, "docker", "build", "-q", "-t", f.image, "-f", filepath.Join(f.root, "deploy/Dockerfile"), f.bin)
	f.t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", f.image).Run() })
}

func (f *fleet) secrets() {
	f.secretsDir = filepath.Join(f.t.TempDir(), "secrets")
	f.subnet = freeSubnet(f.t)
	f.run(nil, filepath.Join(f.root, "deploy/gen-secrets.sh"), f.secretsDir, f.subnet, filepath.Join(f.bin, "fak"))
	data, err := os.ReadFile(filepath.Join(f.secretsDir, "tokens"))
	if err != nil {
		f.t.Fatal(err)
	}
	f.tokens = map[string]string{}
	for line := range strings.Lines(string(data)) {
		if role, tok, ok := strings.Cut(strings.TrimSpace(line), " "); ok && !strings.HasPrefix(role, "#") {
			f.tokens[role] = tok
		}
	}
	if f.tokens["operator"] == "" || f.tokens["read"] == "" {
		f.t.Fatalf("gen-secrets.sh wrote no operator or read token:\n%s", data)
	}
}

func (f *fleet) composeArgs() []string {
	return append(slices.Clone(f.compose), "-p", f.project, "-f", filepath.Join(f.root, "deploy/docker-compose.yml"))
}

func (f *fleet) composeEnv() []string {
	env := []string{"FAK_IMAGE=" + f.image, "FAK_SECRETS=" + f.secretsDir, "FAK_SUBNET=" + f.subnet}
	for i, p := range f.ports {
		env = append(env, fmt.Sprintf("FAK_PORT_N%d=%s", i+1, p))
	}
	return env
}

func (f *fleet) up() {
	for range 3 {
		f.ports = append(f.ports, freePort(f.t))
	}
	f.t.Cleanup(f.down)
	f.run(nil, append(f.composeArgs(), "up", "-d")...)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var states []string
		for _, n := range []string{"n1", "n2", "n3"} {
			id := strings.TrimSpace(f.run(nil, append(f.composeArgs(), "ps", "-q", n)...))
			out, _ := exec.Command("docker", "inspect", "-f", "{{.State.Health.Status}}", id).Output()
			states = append(states, strings.TrimSpace(string(out)))
		}
		if slices.Equal(slices.Compact(slices.Clone(states)), []string{"healthy"}) {
			return
		}
		if time.Now().After(deadline) {
			logs, _ := exec.Command(f.compose[0], append(f.composeArgs()[1:], "logs", "--tail", "30")...).CombinedOutput()
			f.t.Fatalf("fleet not healthy within 2m: %v\n%s", states, logs)
		}
		time.Sleep(time.Second)
	}
}

func (f *fleet) down() {
	if f.downDone {
		return
	}
	f.downDone = true
	c := exec.Command(f.compose[0], append(f.composeArgs()[1:], "down", "-v", "--remove-orphans", "-t", "10")...)
	c.Env = append(os.Environ(), f.composeEnv()...)
	if out, err := c.CombinedOutput(); err != nil {
		f.t.Errorf("compose down: %v\n%s", err, out)
	}
}

// run runs a command with the compose variables set and returns its stdout;
// a failure fails the test.
func (f *fleet) run(extraEnv []string, args ...string) string {
	c := exec.CommandContext(f.ctx, args[0], args[1:]...)
	c.Env = append(append(os.Environ(), f.composeEnv()...), extraEnv...)
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		f.t.Fatalf("%s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// fakctl runs bin/fakctl against 127.0.0.1:port as the operator, with the
// fleet's CA and client certificate; env overrides those settings.
func (f *fleet) fakctl(port string, env map[string]string, args ...string) (string, error) {
	vars := map[string]string{
		"FAK_ADDR":        "https://127.0.0.1:" + port,
		"FAK_TOKEN":       f.tokens["operator"],
		"FAK_CACERT":      filepath.Join(f.secretsDir, "tls/ca.pem"),
		"FAK_CLIENT_CERT": filepath.Join(f.secretsDir, "tls/client.pem"),
		"FAK_CLIENT_KEY":  filepath.Join(f.secretsDir, "tls/client-key.pem"),
	}
	for k, v := range env {
		vars[k] = v
	}
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, filepath.Join(f.bin, "fakctl"), args...)
	c.Env = os.Environ()
	for k, v := range vars {
		c.Env = append(c.Env, k+"="+v)
	}
	out, err := c.CombinedOutput()
	return string(out), err
}

func (f *fleet) fakctlJSON(port string, v any, args ...string) {
	out, err := f.fakctl(port, nil, append(args, "-o", "json")...)
	if err != nil {
		f.t.Fatalf("fakctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		f.t.Fatalf("fakctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// leaderOrEmpty asks the node at port who leads; "" if it cannot say.
func (f *fleet) leaderOrEmpty(port string) string {
	out, err := f.fakctl(port, nil, "cluster", "status", "--all=false", "-o", "json")
	if err != nil {
		return ""
	}
	var st struct {
		Nodes []struct {
			LeaderID string `json:"leaderId"`
		} `json:"nodes"`
	}
	if json.Unmarshal([]byte(out), &st) != nil || len(st.Nodes) == 0 {
		return ""
	}
	return st.Nodes[0].LeaderID
}

func (f *fleet) leader(port string) string {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if l := f.leaderOrEmpty(port); l != "" {
			return l
		}
		if time.Now().After(deadline) {
			f.t.Fatal("no leader known within 30s")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// composeTool returns the compose command when a Docker engine answers:
// the docker compose plugin, else docker-compose; nil if neither.
func composeTool() []string {
	if exec.Command("docker", "version", "--format", "{{.Server.Version}}").Run() != nil {
		return nil
	}
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	if exec.Command("docker-compose", "version").Run() == nil {
		return []string{"docker-compose"}
	}
	return nil
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// freeSubnet picks a /24 in 172.29.100-199 that no Docker network uses.
func freeSubnet(t *testing.T) string {
	out, err := exec.Command("sh", "-c", `docker network inspect -f '{{range .IPAM.Config}}{{.Subnet}} {{end}}' $(docker network ls -q)`).Output()
	if err != nil {
		t.Fatalf("list docker networks: %v", err)
	}
	used := string(out)
	for i := range 100 {
		prefix := fmt.Sprintf("172.29.%d", 100+(os.Getpid()+i)%100)
		if !strings.Contains(used, prefix+".0/") {
			return prefix
		}
	}
	t.Fatal("no free 172.29.x.0/24 subnet")
	return ""
}
