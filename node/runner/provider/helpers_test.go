package provider

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/proc/proctest"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

const testSession = "ses_test"

// fixture is a test's fake CLIs: testdata/bin first on PATH, a HOME of
// its own, and the log the fakes write.
type fixture struct {
	t   *testing.T
	log string
}

// newFixture puts the fakes on PATH. It sets the process environment, so
// its tests do not run in parallel.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("testdata", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv("HOME", t.TempDir())
	return &fixture{t: t, log: filepath.Join(t.TempDir(), "cli.log")}
}

// options are o for the fakes: FAKE_CLI_LOG handed over, a name.
func (f *fixture) options(o Options) Options {
	o.Env = append(o.Env, "FAKE_CLI_LOG="+f.log)
	if o.Name == "" {
		o.Name = "test-" + o.Kind
	}
	return o
}

// start validates o and starts a runtime for epoch 3 of testSession in a
// fresh workspace, reading j; ep adjusts the epoch (nil: none).
func (f *fixture) start(o Options, j runner.Journal, ep func(*runner.Epoch)) (*runtime, string) {
	t := f.t
	t.Helper()
	a, err := New(f.options(o))
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(t.TempDir(), "workspaces", testSession)
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	e := runner.Epoch{SessionID: testSession, Epoch: 3, Workspace: ws, Addr: "127.0.0.1:7070"}
	if ep != nil {
		ep(&e)
	}
	if j == nil {
		j = runnertest.Journal{}
	}
	rt, err := a.Start(context.Background(), e, j)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Stop() })
	return rt.(*runtime), ws
}

// run is one fake CLI run as its log tells it.
type run struct {
	cli   string
	argv  []string
	env   map[string]string
	lines []string // everything else, in order
}

func (r run) has(prefix string) bool {
	for _, l := range r.lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

func (r run) line(prefix string) string {
	for _, l := range r.lines {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimPrefix(l, prefix)
		}
	}
	return ""
}

// runs reads the fakes' log: one run per process started.
func (f *fixture) runs() []run {
	f.t.Helper()
	b, err := os.ReadFile(f.log)
	if err != nil {
		f.t.Fatalf("the fake CLI logged nothing: %v", err)
	}
	var out []run
	for _, l := range strings.Split(string(b), "\n") {
		if cli, ok := strings.CutPrefix(l, "--- "); ok {
			out = append(out, run{cli: cli, env: map[string]string{}})
			continue
		}
		if len(out) == 0 {
			continue
		}
		r := &out[len(out)-1]
		switch {
		case strings.HasPrefix(l, "arg "):
			r.argv = append(r.argv, strings.TrimPrefix(l, "arg "))
		case strings.HasPrefix(l, "env "):
			k, v, _ := strings.Cut(strings.TrimPrefix(l, "env "), "=")
			r.env[k] = v
		default:
			r.lines = append(r.lines, l)
		}
	}
	return out
}

// last is the last run logged.
func (f *fixture) last() run {
	f.t.Helper()
	rs := f.runs()
	if len(rs) == 0 {
		f.t.Fatal("no run logged")
	}
	return rs[len(rs)-1]
}

func inputEvent(seq uint64, text string) *fsmpb.Event {
	return &fsmpb.Event{SessionId: testSession, Seq: seq, Kind: fsm.KindInput, Text: text}
}

// mustTurn runs a turn that must succeed.
func mustTurn(t *testing.T, rt runner.Runtime, in *fsmpb.Event, tr runner.Turn) runner.TurnResult {
	t.Helper()
	res, err := proctest.RunTurn(t, rt, in, tr)
	if err != nil {
		t.Fatalf("turn %d: %v", in.Seq, err)
	}
	return res
}

// kinds lists the kinds of events, output runs folded into one.
func kinds(evs []runner.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Kind == fsm.KindOutput && len(out) > 0 && out[len(out)-1] == fsm.KindOutput {
			continue
		}
		out = append(out, e.Kind)
	}
	return out
}

// wantKinds fails unless the turn's events are of these kinds, in order
// (consecutive outputs count once).
func wantKinds(t *testing.T, tr *runnertest.Turn, want ...string) {
	t.Helper()
	if got := kinds(tr.Events()); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// wantFSMOrder checks the turn's events against the FSM's rules for a
// running turn: approval.requested only with no approval pending, which
// the next tool.result clears.
func wantFSMOrder(t *testing.T, evs []runner.Event) {
	t.Helper()
	pending := false
	for i, e := range evs {
		switch e.Kind {
		case fsm.KindApprovalRequested:
			if pending {
				t.Fatalf("event %d: approval.requested while another is pending (%v)", i, kinds(evs))
			}
			pending = true
		case fsm.KindToolResult:
			pending = false
		}
	}
}

// data decodes an event's JSON data.
func data(t *testing.T, e runner.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Data, &m); err != nil {
		t.Fatalf("%s data %q: %v", e.Kind, e.Data, err)
	}
	return m
}

// eventsOf returns the turn's events of kind.
func eventsOf(tr *runnertest.Turn, kind string) []runner.Event {
	var out []runner.Event
	for _, e := range tr.Events() {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// liveJournal is a Journal that grows: a test appends what the cluster
// would (an approval's answer).
type liveJournal struct {
	mu     sync.Mutex
	events []*fsmpb.Event
}

func (j *liveJournal) add(ev *fsmpb.Event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, ev)
}

func (j *liveJournal) Events(from uint64, limit int) ([]*fsmpb.Event, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return runnertest.Journal(j.events).Events(from, limit)
}

// history is a journal of earlier turns: each pair is an input and its
// answer, then the input at seq and its turn.started (the turn running).
func history(seq uint64, text string, pairs ...string) runnertest.Journal {
	var j runnertest.Journal
	n := uint64(0)
	add := func(kind, text string, data string) {
		n++
		j = append(j, &fsmpb.Event{SessionId: testSession, Seq: n, Kind: kind, Text: text, Data: []byte(data)})
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		add(fsm.KindInput, pairs[i], "")
		add(fsm.KindTurnStarted, "x on n1", `{"input_seq":`+strconv.FormatUint(n, 10)+`}`)
		add(fsm.KindOutput, pairs[i+1], "")
		add(fsm.KindTurnCompleted, "completed", `{"status":"completed"}`)
	}
	if n+1 != seq {
		panic("history: the input's seq does not follow the pairs")
	}
	add(fsm.KindInput, text, "")
	add(fsm.KindTurnStarted, "x on n1", `{"input_seq":`+strconv.FormatUint(seq, 10)+`}`)
	return j
}
