package exec

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/proc/proctest"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

func TestNewRefusesABadRuntimeBlock(t *testing.T) {
	ok := Options{Name: "a", Command: []string{"agent"}}
	with := func(f func(o *Options)) Options {
		o := ok
		f(&o)
		return o
	}
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no name", with(func(o *Options) { o.Name = "" }), "no name"},
		{"no command", with(func(o *Options) { o.Command = nil }), "no command"},
		{"empty argv0", with(func(o *Options) { o.Command = []string{""} }), "no command"},
		{"protocol", with(func(o *Options) { o.Protocol = "xml" }), `unknown protocol "xml"`},
		{"sandbox", with(func(o *Options) { o.Sandbox = "docker" }), `unknown sandbox "docker"`},
		{"timeout", with(func(o *Options) { o.TurnTimeout = -1 }), "negative turn_timeout"},
		{"env not kv", with(func(o *Options) { o.Env = []string{"OPENAI_API_KEY"} }), "not KEY=VALUE"},
		{"env token", with(func(o *Options) { o.Env = []string{"FAK_TOKEN=x"} }), "FAK_ names are fak's own"},
	} {
		if _, err := New(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New(%+v) = %v, want an error saying %q", tc.name, tc.o, err, tc.want)
		}
	}
	for _, o := range []Options{ok,
		with(func(o *Options) { o.Protocol = ProtocolJSONL; o.Sandbox = "none" }),
		with(func(o *Options) { o.Protocol = ProtocolText; o.Env = []string{"OPENAI_API_KEY=sk-x"} }),
	} {
		a, err := New(o)
		if err != nil {
			t.Errorf("New(%+v): %v", o, err)
			continue
		}
		if a.Name() != o.Name {
			t.Errorf("Name() = %q, want %q", a.Name(), o.Name)
		}
	}
}

func TestStartNeedsAnAbsoluteWorkspace(t *testing.T) {
	a, err := New(Options{Name: "a", Command: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Start(context.Background(), runner.Epoch{SessionID: "s", Workspace: "rel/ws"}, runnertest.Journal{}); err == nil {
		t.Fatal("Start accepted a relative workspace")
	}
}

// The process sees fak's variables and what the runtime block hands over,
// never the node's token or keys.
func TestTheProcessEnvironmentIsClean(t *testing.T) {
	t.Setenv("FAK_TOKEN", "node-token")
	t.Setenv("OPENAI_API_KEY", "sk-node")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-node")
	envPath, err := exec.LookPath("env")
	if err != nil {
		t.Fatal(err)
	}
	rt, ws := start(t, Options{Command: []string{envPath}, Env: []string{"ACCOUNT_KEY=sk-handed-over"}}, nil, 0)
	tr := &runnertest.Turn{Input: 42}
	if _, err := proctest.RunTurn(t, rt, inputEvent(42, "ignored"), tr); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(tr.Output(), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	for k, want := range map[string]string{
		"FAK_SESSION_ID": testSession,
		"FAK_EPOCH":      "3",
		"FAK_INPUT_SEQ":  "42",
		"FAK_ADDR":       "127.0.0.1:7070",
		"FAK_WORKSPACE":  ws,
		"ACCOUNT_KEY":    "sk-handed-over",
	} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
	for _, k := range []string{"FAK_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY"} {
		if v, ok := env[k]; ok {
			t.Errorf("the process sees %s=%q", k, v)
		}
	}
	if env["PATH"] == "" {
		t.Error("the process has no PATH")
	}
}

func TestACommandThatCannotStartFailsTheTurn(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{ProtocolText, ProtocolJSONL} {
		rt, _ := start(t, Options{Command: []string{"/nonexistent/agent"}, Protocol: proto}, runnertest.Journal{inputEvent(1, "hi")}, 0)
		_, err := proctest.RunTurn(t, rt, inputEvent(1, "hi"), &runnertest.Turn{Input: 1})
		proctest.WantReason(t, err, ReasonExecStart, "/nonexistent/agent")
	}
}
