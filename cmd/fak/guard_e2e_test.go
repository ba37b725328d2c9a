package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// End to end through the real fak binary, its guard and lifecycle socket, on
// a three-node fleet: fake providers (testdata/guard) run the hooks the
// guard injected the way Claude Code, Codex and Gemini CLI do, and the
// cluster's sessions, journals, lineage, launch record and budget envelope
// are checked after each run.

// guardHookBudget replaces the hooks' 2 s budget in these runs: a loaded CI
// machine running race-built binaries must not turn a slow commit into a
// fail-open (the fail-open paths have their own tests).
const guardHookBudget = "30s"

// guardFleet is the fleet and the binaries the runs share.
type guardFleet struct {
	c     *testcluster.Cluster
	n     *testcluster.Node // the node the guards talk to (a follower)
	bin   string            // directory holding the fak binary
	fakes string            // testdata/guard
}

func TestGuardE2E(t *testing.T) {
	guardNeedTools(t, "jq", "python3", "stat")
	fakes, err := filepath.Abs(filepath.Join("testdata", "guard"))
	if err != nil {
		t.Fatal(err)
	}
	g := &guardFleet{bin: guardBuildFak(t), fakes: fakes}
	g.c = testcluster.New(t, testcluster.Options{Nodes: 3, LogLevel: "off"})
	// A follower: BindLaunch, the hooks and RecordUsage are forwarded to
	// the leader with the caller's token.
	g.n = g.c.Followers()[0]

	t.Run("claude", g.testClaude)
	t.Run("codex", g.testCodex)
	t.Run("gemini", g.testGemini)
	t.Run("generic harness", g.testGeneric)
	t.Run("existing session and exit code", g.testExistingSession)
	t.Run("signals", g.testSignals)
	// Last: it stops the fleet.
	t.Run("fail-open with the cluster stopped", g.testClusterStopped)
}

// Claude Code: startup, /clear (SessionEnd(clear) then SessionStart(clear)
// with a new id), the same clear delivered again, a compaction, a /resume
// to another conversation, exit. The user's own --settings hooks still run.
func (g *guardFleet) testClaude(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "user-hook.log")
	user := filepath.Join(dir, "user-settings.json")
	guardWriteJSON(t, user, map[string]any{"hooks": map[string]any{"SessionStart": []any{map[string]any{
		"matcher": "startup", "hooks": []any{map[string]any{"type": "command", "command": "cat >> " + marker}}}}}})
	fifo := filepath.Join(dir, "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	p := g.start(t, nil, "--provider", "claude", "--", "fake-claude", "--settings", user,
		"start:startup:A", "end:clear:A", "start:clear:B", "wait:"+fifo, "start:clear:B",
		"start:compact:B", "end:resume:B", "start:resume:X", "end:prompt_input_exit:X", "exit:3")
	p.waitFor(t, "waiting")
	// The moment the clear's hook has returned, the launch's default is the
	// child: a charge without a trace id lands there.
	mid := p.info()
	s0 := mid.session
	s1 := g.expectOneBoundary(t, s0, "claude", "clear", "B")
	if l := g.describeLaunch(t, mid.launch); l.GetDefaultSession() != s1 || l.GetProviderSessionId() != "B" {
		t.Fatalf("right after the clear the launch is %v, want default %s bound to B", l, s1)
	}
	g.expectBudgetCarried(t, mid.launch, s0, s1)
	guardWriteFIFO(t, fifo)
	run := p.wait(t)
	run.expect(t, 3)
	if got := g.expectOneBoundary(t, s0, "claude", "clear", "B"); got != s1 {
		t.Fatalf("the redelivered clear moved the launch to %s", got)
	}
	// compact and resume kept the session.
	l := g.describeLaunch(t, run.launch)
	if l.GetDefaultSession() != s1 || l.GetProviderSessionId() != "X" {
		t.Fatalf("launch = %v, want default %s bound to X", l, s1)
	}
	j1 := g.journal(t, s1)
	if n := guardCountKind(j1, "compaction"); n != 1 {
		t.Errorf("%d compaction events in the child, want 1", n)
	}
	if e := guardFindEvent(j1, "epoch.changed", "resume"); e == nil {
		t.Errorf("no epoch change for the resume in the child:\n%s", guardEventList(j1))
	}
	if n := guardCountKind(j1, "provider.session_end"); n != 2 {
		t.Errorf("%d SessionEnd audit events in the child, want 2 (resume, exit)", n)
	}
	j0 := g.journal(t, s0)
	if n := guardCountKind(j0, "provider.bound"); n != 1 {
		t.Errorf("%d provider.bound events in the launch session, want 1", n)
	}
	if e := guardFindEvent(j0, "provider.session_end", "clear"); e == nil {
		t.Errorf("the SessionEnd(clear) audit event is missing from the old session:\n%s", guardEventList(j0))
	}
	// Both sessions are served by claude here: the external runtime of the
	// launch, on this host (the clear kept the placement).
	host, _ := os.Hostname()
	for _, id := range []string{s0, s1} {
		p := g.session(t, id).GetPlacement()
		if p.GetRuntimeAdapter() != "external" || p.GetLaunchId() != run.launch || p.GetHost() != host || p.GetNode() != "" || p.GetProvider() != "claude" {
			t.Errorf("session %s placement %v, want external claude of launch %s on host %s", id, p, run.launch, host)
		}
	}
	// The user's SessionStart hook (matcher startup) ran once, next to ours.
	if b, err := os.ReadFile(marker); err != nil || strings.Count(string(b), `"source":"startup"`) != 1 {
		t.Fatalf("the user's --settings hook: %v %q", err, b)
	}
}

// Codex: startup A, startup A again (a no-op), startup B (/new: one
// boundary, source new), clear C (one more). The hook runs only because its
// exact definition is trusted.
func (g *guardFleet) testCodex(t *testing.T) {
	run := g.guard(t, nil, "--provider", "codex", "--", "fake-codex", "exec", "--skip-git-repo-check",
		"start:startup:A", "start:startup:A", "start:startup:B", "start:clear:C")
	run.expect(t, 0)

	s0 := run.session
	if n := guardCountKind(g.journal(t, s0), "provider.bound"); n != 1 {
		t.Errorf("%d provider.bound events, want 1 (the repeated startup is a no-op)", n)
	}
	s1 := g.expectOneBoundary(t, s0, "codex", "new", "B")
	s2 := g.expectOneBoundary(t, s1, "codex", "clear", "C")
	l := g.describeLaunch(t, run.launch)
	if l.GetDefaultSession() != s2 || l.GetProviderSessionId() != "C" {
		t.Fatalf("launch = %v, want default %s bound to C", l, s2)
	}
	if lin := g.lineage(t, s0); len(lin.GetNodes()) != 3 {
		t.Fatalf("lineage has %d sessions, want 3: %v", len(lin.GetNodes()), lin)
	}
	g.expectBudgetCarried(t, run.launch, s0, s2)
}

// Gemini CLI: /clear is SessionEnd(clear) with the old id then
// SessionStart(clear) with a new one: one boundary. The machine's system
// defaults (with an admin hook) still apply.
func (g *guardFleet) testGemini(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "admin-hook.log")
	defaults := filepath.Join(dir, "system-defaults.json")
	original := `{
  // the machine's defaults
  "general": {"vimMode": true},
  "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "cat >> ` + marker + `"}]}]}
}
`
	if err := os.WriteFile(defaults, []byte(original), 0o644); err != nil {
		t.Fatal(err)
	}
	run := g.guard(t, []string{"GEMINI_CLI_SYSTEM_DEFAULTS_PATH=" + defaults}, "--provider", "gemini", "--",
		"fake-gemini", "start:startup:G1", "end:clear:G1", "start:clear:G2", "end:exit:G2")
	run.expect(t, 0)

	s0 := run.session
	s1 := g.expectOneBoundary(t, s0, "gemini", "clear", "G2")
	if l := g.describeLaunch(t, run.launch); l.GetDefaultSession() != s1 || l.GetProviderSessionId() != "G2" {
		t.Fatalf("launch = %v, want default %s bound to G2", l, s1)
	}
	if e := guardFindEvent(g.journal(t, s0), "provider.session_end", "clear"); e == nil {
		t.Error("the SessionEnd(clear) audit event is missing from the old session")
	}
	if e := guardFindEvent(g.journal(t, s1), "provider.session_end", "exit"); e == nil {
		t.Error("the SessionEnd(exit) audit event is missing from the child")
	}
	g.expectBudgetCarried(t, run.launch, s0, s1)
	if b, err := os.ReadFile(marker); err != nil || strings.Count(string(b), `"hook_event_name":"SessionStart"`) != 2 {
		t.Fatalf("the admin hook from the system defaults: %v %q", err, b)
	}
	if b, _ := os.ReadFile(defaults); string(b) != original {
		t.Fatal("the machine's system defaults file was modified")
	}
}

// A harness without an adapter calls the hook itself with thread_id.
func (g *guardFleet) testGeneric(t *testing.T) {
	run := g.guard(t, nil, "--provider", "mytool", "--", "fake-mytool",
		"start:startup:T1", "start:clear:T2", "start:clear:T2", "end:exit:T2")
	run.expect(t, 0)
	if !strings.Contains(run.stdout, "rundir-mode=700 socket-mode=600") {
		t.Errorf("run directory and socket modes: %q", run.stdout)
	}
	s1 := g.expectOneBoundary(t, run.session, "mytool", "clear", "T2")
	if l := g.describeLaunch(t, run.launch); l.GetDefaultSession() != s1 || l.GetProviderSessionId() != "T2" {
		t.Fatalf("launch = %v, want default %s bound to T2", l, s1)
	}
	g.expectBudgetCarried(t, run.launch, run.session, s1)
	if _, err := os.Stat(filepath.Dir(run.socket)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run directory %s outlived the guard: %v", filepath.Dir(run.socket), err)
	}
}

// --session binds the launch to an existing session; the child's exit code
// is the guard's.
func (g *guardFleet) testExistingSession(t *testing.T) {
	resp, err := g.c.Sessions(g.n).CreateSession(g.ctx(t), connect.NewRequest(&fakv1.CreateSessionRequest{Title: "mine"}))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Msg.GetSession().GetSessionId()
	run := g.guard(t, nil, "--session", id, "--provider", "mytool", "--", "fake-mytool", "say:hello", "exit:7")
	run.expect(t, 7)
	if run.session != id || !strings.Contains(run.stdout, "hello") {
		t.Fatalf("FAK_SESSION_ID = %q (want %s), stdout %q", run.session, id, run.stdout)
	}
	if l := g.describeLaunch(t, run.launch); l.GetDefaultSession() != id || l.GetProvider() != "mytool" {
		t.Fatalf("launch = %v", l)
	}
	// The session the fleet ran is now the launch's: external, in a new
	// epoch (reason launch).
	if s := g.session(t, id); s.GetPlacement().GetRuntimeAdapter() != "external" || s.GetPlacement().GetLaunchId() != run.launch || s.GetEpoch() != 2 {
		t.Fatalf("bound session %v", s)
	}
	if e := guardFindEvent(g.journal(t, id), "epoch.changed", "launch"); e == nil {
		t.Errorf("no epoch change for the launch:\n%s", guardEventList(g.journal(t, id)))
	}
}

// Signals sent to the guard reach the child; a child killed by a signal
// makes the guard exit 128+N.
func (g *guardFleet) testSignals(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGTERM, 42}, {syscall.SIGINT, 43}, {syscall.SIGHUP, 44}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			script := fmt.Sprintf(`trap 'echo got-signal; exit %d' %s; echo ready; while :; do sleep 0.05; done`,
				tc.code, strings.TrimPrefix(guardSignalName(tc.sig), "SIG"))
			p := g.start(t, nil, "--provider", "mytool", "--", "sh", "-c", script)
			p.waitFor(t, "ready")
			if err := p.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			run := p.wait(t)
			run.expect(t, tc.code)
			if !strings.Contains(run.stdout, "got-signal") {
				t.Fatalf("the child did not see %v: %q", tc.sig, run.stdout)
			}
		})
	}
	run := g.guard(t, nil, "--provider", "mytool", "--", "sh", "-c", "kill -KILL $$")
	run.expect(t, 128+int(syscall.SIGKILL))
}

// With the fleet down, a /clear fails open: the hook prints one line, the
// provider goes on, and once the fleet is back nothing has changed.
func (g *guardFleet) testClusterStopped(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	p := g.start(t, nil, "--provider", "claude", "--", "fake-claude", "--settings", "{}",
		"start:startup:A", "wait:"+fifo, "start:clear:B", "say:after-clear")
	p.waitFor(t, "waiting")
	g.c.StopAll()
	guardWriteFIFO(t, fifo)
	run := p.wait(t)
	if run.code != 0 || !strings.Contains(run.stdout, "after-clear") {
		t.Fatalf("exit %d, stdout %q, stderr %q: the provider must go on", run.code, run.stdout, run.stderr)
	}
	if strings.Count(run.stderr, "\n") != 1 || len(run.stderr) > 200 ||
		!strings.HasPrefix(run.stderr, "fak guard-sessionstart: ") || !strings.Contains(run.stderr, "fail-open") {
		t.Fatalf("stderr = %q, want one fail-open line of at most 200 bytes", run.stderr)
	}

	for _, n := range g.c.Nodes {
		g.c.Start(n)
	}
	g.c.WaitForLeader(30 * time.Second)
	l := g.describeLaunch(t, run.launch)
	if l.GetDefaultSession() != run.session || l.GetProviderSessionId() != "A" {
		t.Fatalf("launch = %v, want it still on %s bound to A", l, run.session)
	}
	if s := g.session(t, run.session); s.GetState() != fakv1.SessionState_SESSION_STATE_ACTIVE {
		t.Fatalf("the launch session is %v after a failed clear", s.GetState())
	}
	if lin := g.lineage(t, run.session); len(lin.GetNodes()) != 1 {
		t.Fatalf("lineage %v: a failed clear made a child", lin)
	}
}

// expectOneBoundary checks that prev was ended by exactly one boundary:
// prev is STOPPED with reason PROVIDER_SESSION_CLEAR and still readable, its
// only child starts with the provider-boundary event, and it returns the
// child's id.
func (g *guardFleet) expectOneBoundary(t *testing.T, prev, provider, source, providerID string) string {
	t.Helper()
	s := g.session(t, prev)
	if s.GetState() != fakv1.SessionState_SESSION_STATE_STOPPED || s.GetStopReason() != "PROVIDER_SESSION_CLEAR" {
		t.Fatalf("session %s is %v (%q), want STOPPED with PROVIDER_SESSION_CLEAR", prev, s.GetState(), s.GetStopReason())
	}
	if j := g.journal(t, prev); guardCountKind(j, "session.stopped") != 1 {
		t.Fatalf("journal of the stopped session:\n%s", guardEventList(j))
	}
	var children []string
	for _, n := range g.lineage(t, prev).GetNodes() {
		if n.GetSession().GetSessionId() == prev {
			children = n.GetChildren()
		}
	}
	if len(children) != 1 {
		t.Fatalf("session %s has children %v, want exactly one", prev, children)
	}
	child := children[0]
	cs := g.session(t, child)
	if cs.GetParentSession() != prev || cs.GetBoundarySource() != source {
		t.Fatalf("child %s: parent %q source %q, want %s %s", child, cs.GetParentSession(), cs.GetBoundarySource(), prev, source)
	}
	j := g.journal(t, child)
	if guardCountKind(j, "fak.session.provider_boundary.v1") != 1 {
		t.Fatalf("child journal:\n%s", guardEventList(j))
	}
	e := guardFindEvent(j, "fak.session.provider_boundary.v1", "")
	var fact map[string]string
	if err := json.Unmarshal(e.GetData(), &fact); err != nil {
		t.Fatalf("boundary fact %q: %v", e.GetData(), err)
	}
	want := map[string]string{"provider": provider, "source": source, "previous_session": prev, "new_provider_session_id": providerID}
	for k, v := range want {
		if fact[k] != v {
			t.Fatalf("boundary fact %v, want %v", fact, want)
		}
	}
	return child
}

// expectBudgetCarried charges the launch (no trace id): the charge lands on
// the launch's current session at once and debits the envelope the launch
// session started with.
func (g *guardFleet) expectBudgetCarried(t *testing.T, launch, first, current string) {
	t.Helper()
	envelope := g.session(t, first).GetEnvelopeId()
	if envelope == "" || g.session(t, current).GetEnvelopeId() != envelope {
		t.Fatalf("envelope of %s is %q, of %s %q", first, envelope, current, g.session(t, current).GetEnvelopeId())
	}
	resp, err := g.lifecycle().RecordUsage(g.ctx(t), connect.NewRequest(&fakv1.RecordUsageRequest{
		LaunchId: launch, Usage: &fakv1.Budget{Turns: 1, SpendMicros: 250, ToolCalls: 2},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Msg.GetSessionId() != current || resp.Msg.GetEnvelope().GetEnvelopeId() != envelope {
		t.Fatalf("RecordUsage charged %s on envelope %s, want %s on %s", resp.Msg.GetSessionId(),
			resp.Msg.GetEnvelope().GetEnvelopeId(), current, envelope)
	}
	if u := resp.Msg.GetEnvelope().GetUsed(); u.GetSpendMicros() != 250 || u.GetTurns() != 1 || u.GetToolCalls() != 2 {
		t.Fatalf("envelope used = %v", u)
	}
}
