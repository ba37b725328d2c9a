package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

const (
	// eventsBeforeKill are appended round-robin through all three nodes,
	// eventsAfterKill through the two survivors of the leader's crash.
	eventsBeforeKill = 30
	eventsAfterKill  = 20

	leaderTimeout      = 60 * time.Second
	appendRetryTimeout = 60 * time.Second
	membersTimeout     = 60 * time.Second
	catchUpTimeout     = 90 * time.Second
)

// TestProcessFleet runs three `fak agent` processes and drives them only
// through fakctl: it writes a session's journal through every node, crashes
// the leader with SIGKILL, keeps writing through the survivors, and checks
// that no acknowledged event is lost, reordered or duplicated on any node —
// including the crashed one once it restarts from its data dir.
func TestProcessFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fak and fakctl and runs a three-node fleet of processes; skipped with -short")
	}
	bins := buildBinaries(t)
	f := startFleet(t, bins, 3)

	leader := f.waitForLeader(f.agents)
	t.Logf("fleet is up; leader %s", leader.name)

	// Create the session through a follower, so the write is forwarded.
	creator := f.agents[0]
	if creator == leader {
		creator = f.agents[1]
	}
	out := f.mustFakctl(creator, "session", "create", "--title", "e2e", "--objective", "survive a leader crash", "-o", "json")
	session := &fakv1.Session{}
	if err := unmarshal(out, session); err != nil {
		t.Fatal(err)
	}
	if session.GetSessionId() == "" || session.GetTitle() != "e2e" || session.GetState() != fakv1.SessionState_SESSION_STATE_ACTIVE {
		t.Fatalf("session create printed %v", session)
	}
	// The first epoch is placed on the node that received the request.
	if session.GetHeadSeq() != 2 || session.GetEpoch() != 1 || session.GetPlacement().GetNode() != creator.name ||
		session.GetPlacement().GetRuntimeAdapter() != "echo" {
		t.Fatalf("session create printed %v; want head 2, epoch 1, echo on %s", session, creator.name)
	}
	j := &journal{f: f, sessionID: session.GetSessionId()}
	j.start(creator, session.GetHeadSeq())
	if kinds := j.kinds(); !slices.Equal(kinds, []string{"session.created", "epoch.changed"}) {
		t.Fatalf("a new session's journal is %v, want session.created, epoch.changed", kinds)
	}
	t.Logf("created session %s through %s; its journal starts with %d events", j.sessionID, creator.name, len(j.acked))

	checkPlacement(t, f, j.sessionID)

	checkWrongToken(t, f, j.sessionID)

	for i := 1; i <= eventsBeforeKill; i++ {
		j.append(f.agents[(i-1)%len(f.agents)], i, f.agents)
	}
	for _, a := range f.agents {
		j.check(a)
	}
	t.Logf("%d events appended and read back through every node", eventsBeforeKill)

	// Crash the current leader.
	leader = f.waitForLeader(f.agents)
	var survivors []*agent
	for _, a := range f.agents {
		if a != leader {
			survivors = append(survivors, a)
		}
	}
	t.Logf("killing leader %s (pid %d)", leader.name, leader.cmd.Process.Pid)
	killedAt := time.Now()
	leader.kill(t)
	killed := leader

	leader = f.waitForLeader(survivors)
	t.Logf("new leader %s after %s", leader.name, time.Since(killedAt).Round(time.Millisecond))

	for i := eventsBeforeKill + 1; i <= eventsBeforeKill+eventsAfterKill; i++ {
		j.append(survivors[i%len(survivors)], i, survivors)
	}
	for _, a := range survivors {
		j.check(a)
	}
	t.Logf("%d more events appended and read back through the survivors", eventsAfterKill)

	for _, a := range survivors {
		f.waitFor(membersTimeout, fmt.Sprintf("%s to see %s as not alive", a.name, killed.name), func() (bool, string) {
			members, err := f.members(a)
			if err != nil {
				return false, err.Error()
			}
			m, ok := members[killed.name]
			switch {
			case !ok:
				return false, fmt.Sprintf("%s is not listed", killed.name)
			case m.GetStatus() == "alive":
				return false, fmt.Sprintf("%s is still alive", killed.name)
			}
			return true, ""
		})
	}
	t.Logf("survivors see %s as not alive after %s", killed.name, time.Since(killedAt).Round(time.Millisecond))

	// Restart the crashed node from its data dir: it must catch up.
	killed.start(t)
	restartedAt := time.Now()
	f.waitFor(catchUpTimeout, fmt.Sprintf("restarted %s to catch up", killed.name), func() (bool, string) {
		r := f.fakctl(killed, "session", "log", j.sessionID, "--stale", "-o", "json")
		if !r.ok() {
			return false, r.String()
		}
		events, err := parseEvents(r.stdout)
		if err != nil {
			return false, err.Error()
		}
		if len(events) < len(j.acked) {
			return false, fmt.Sprintf("%d of %d events", len(events), len(j.acked))
		}
		if err := j.compare(events); err != nil {
			t.Fatalf("restarted %s serves a wrong journal: %v", killed.name, err)
		}
		return true, ""
	})
	t.Logf("restarted %s caught up in %s", killed.name, time.Since(restartedAt).Round(time.Millisecond))

	leader = f.waitForLeader(f.agents)
	for _, a := range f.agents {
		j.check(a)
		out := f.mustFakctl(a, "session", "describe", j.sessionID, "-o", "json")
		described := &fakv1.DescribeSessionResponse{}
		if err := unmarshal(out, described); err != nil {
			t.Fatal(err)
		}
		if got, want := described.GetSession().GetHeadSeq(), uint64(len(j.acked)); got != want {
			t.Errorf("session describe on %s: head %d, want %d", a.name, got, want)
		}
	}
	t.Logf("all three nodes agree on %d events; leader %s", len(j.acked), leader.name)
}

// checkWrongToken checks that a call with a token the fleet does not accept
// fails with exit code 1 and a one-line unauthenticated error.
func checkWrongToken(t *testing.T, f *fleet, sessionID string) {
	t.Helper()
	for _, a := range f.agents {
		r := f.fakctlToken(a, "not-the-token", "session", "describe", sessionID)
		if r.code != 1 {
			t.Errorf("with a wrong token on %s: want exit 1; %v", a.name, r)
			continue
		}
		if r.stdout != "" {
			t.Errorf("with a wrong token on %s: unexpected stdout; %v", a.name, r)
		}
		line, ok := strings.CutSuffix(r.stderr, "\n")
		if !ok || line == "" || strings.Contains(line, "\n") {
			t.Errorf("with a wrong token on %s: want exactly one line on stderr; %v", a.name, r)
		}
		if !strings.Contains(strings.ToLower(line), "unauthenticated") {
			t.Errorf("with a wrong token on %s: stderr does not say unauthenticated; %v", a.name, r)
		}
	}
}

// waitForLeader waits until every agent in among names the same leader,
// one of them, and returns it.
func (f *fleet) waitForLeader(among []*agent) *agent {
	f.t.Helper()
	var names []string
	for _, a := range among {
		names = append(names, a.name)
	}
	var leader *agent
	f.waitFor(leaderTimeout, "a leader agreed on by "+strings.Join(names, ", "), func() (bool, string) {
		var why string
		leader, why = f.agreedLeader(among)
		return leader != nil, why
	})
	return leader
}

// ack is an event whose append fakctl reported as successful, or one the
// session was created with.
type ack struct {
	seq        uint64
	kind, text string
}

// journal tracks the acknowledged events of one session, in order.
type journal struct {
	f         *fleet
	sessionID string
	acked     []ack
}

// start records the events a new session's journal starts with (fak
// records the creation itself as the first event): head of them, read back
// through agent a.
func (j *journal) start(a *agent, head uint64) {
	j.f.t.Helper()
	out := j.f.mustFakctl(a, "session", "log", j.sessionID, "-o", "json")
	events, err := parseEvents(out)
	if err != nil {
		j.f.t.Fatal(err)
	}
	if uint64(len(events)) != head {
		j.f.t.Fatalf("new session has head %d but %d events: %q", head, len(events), out)
	}
	for i, ev := range events {
		if ev.GetSeq() != uint64(i+1) || ev.GetSessionId() != j.sessionID {
			j.f.t.Fatalf("new session's event %d is seq %d of session %q", i+1, ev.GetSeq(), ev.GetSessionId())
		}
		j.acked = append(j.acked, ack{seq: ev.GetSeq(), kind: ev.GetKind(), text: ev.GetText()})
	}
}

// leadershipReasons are the errors of a write that raced with a change of
// leader; such a write may be retried (with its request id, so at most one
// attempt takes effect).
var leadershipReasons = []string{"NO_LEADER", "NOT_LEADER", "INDETERMINATE"}

// append appends event i through agent a and records its acknowledged seq.
// A failed append is retried, with the same request id, only while no
// leader is known among the agents in among (or when the failure itself
// says leadership was changing); a failure while a leader is known fails
// the test. An append fakctl reported as successful is acknowledged.
func (j *journal) append(a *agent, i int, among []*agent) {
	f := j.f
	f.t.Helper()
	text := fmt.Sprintf("event %02d through %s", i, a.name)
	requestID := fmt.Sprintf("e2e-%s-%02d", j.sessionID, i)
	deadline := time.Now().Add(appendRetryTimeout)
	for attempt := 1; ; attempt++ {
		// No --kind: fakctl appends notes, the kind any client may append.
		r := f.fakctl(a, "session", "append", j.sessionID, "--text", text, "--request-id", requestID, "-o", "json")
		if r.code == 0 {
			if r.stderr != "" {
				f.t.Errorf("append succeeded but wrote to stderr: %v", r)
			}
			resp := &fakv1.AppendEventsResponse{}
			if err := unmarshal(r.stdout, resp); err != nil {
				// fakctl exited 0: the event is acknowledged, whatever it printed.
				f.t.Fatalf("append of event %d acknowledged with unreadable output: %v", i, err)
			}
			j.record(r, resp, text)
			return
		}
		// A failure is one line on stderr and exit code 1.
		line, _ := strings.CutSuffix(r.stderr, "\n")
		if r.code != 1 || !strings.HasPrefix(line, "Error: ") || strings.Contains(line, "\n") || r.stdout != "" {
			f.t.Fatalf("append failed without a one-line error and exit code 1: %v", r)
		}
		leadershipChange := slices.ContainsFunc(leadershipReasons, func(reason string) bool {
			return strings.Contains(line, reason)
		})
		leader, why := f.agreedLeader(among)
		if leader != nil && !leadershipChange {
			f.t.Fatalf("append of event %d through %s failed while %s leads: %v", i, a.name, leader.name, r)
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("append of event %d still failing after %s (%d attempts): %v", i, appendRetryTimeout, attempt, r)
		}
		f.t.Logf("append of event %d through %s failed (attempt %d; leader: %s): %s; retrying",
			i, a.name, attempt, leaderName(leader, why), line)
		f.waitFor(leaderTimeout, "a leader to retry the append", func() (bool, string) {
			leader, why := f.agreedLeader(among)
			return leader != nil, why
		})
	}
}

func leaderName(leader *agent, why string) string {
	if leader == nil {
		return "none (" + why + ")"
	}
	return leader.name
}

// record checks an acknowledged append and adds it to the journal. Appends
// are sequential and retries reuse the request id, so each acknowledged
// event must take the next seq.
func (j *journal) record(r result, resp *fakv1.AppendEventsResponse, text string) {
	j.f.t.Helper()
	want := uint64(len(j.acked) + 1)
	if resp.GetSessionId() != j.sessionID || resp.GetFirstSeq() != want || resp.GetLastSeq() != want {
		j.f.t.Errorf("append acknowledged session %q seqs %d-%d, want %q seq %d: %v",
			resp.GetSessionId(), resp.GetFirstSeq(), resp.GetLastSeq(), j.sessionID, want, r)
	}
	j.acked = append(j.acked, ack{seq: resp.GetFirstSeq(), kind: "note", text: text})
}

// kinds lists the kinds of the acknowledged events, in order.
func (j *journal) kinds() []string {
	kinds := make([]string, len(j.acked))
	for i, a := range j.acked {
		kinds[i] = a.kind
	}
	return kinds
}

// compare checks that events are exactly the acknowledged events, in
// order, without gaps or duplicates.
func (j *journal) compare(events []*fakv1.Event) error {
	var problems []string
	for i, ev := range events {
		if i >= len(j.acked) {
			problems = append(problems, fmt.Sprintf("unacknowledged event seq %d %q", ev.GetSeq(), ev.GetText()))
			continue
		}
		want := j.acked[i]
		if ev.GetSeq() != want.seq || ev.GetText() != want.text || ev.GetSessionId() != j.sessionID || ev.GetKind() != want.kind {
			problems = append(problems, fmt.Sprintf("event %d is seq %d %s %q (session %q), want seq %d %s %q",
				i+1, ev.GetSeq(), ev.GetKind(), ev.GetText(), ev.GetSessionId(), want.seq, want.kind, want.text))
		}
	}
	if len(events) < len(j.acked) {
		problems = append(problems, fmt.Sprintf("missing %d acknowledged events from seq %d",
			len(j.acked)-len(events), j.acked[len(events)].seq))
	}
	if len(problems) > 0 {
		if len(problems) > 10 {
			problems = append(problems[:10], fmt.Sprintf("and %d more", len(problems)-10))
		}
		return fmt.Errorf("%d events read, %d acknowledged:\n  %s", len(events), len(j.acked), strings.Join(problems, "\n  "))
	}
	return nil
}

// check reads the whole journal through agent a (a linearizable read) and
// compares it with the acknowledged events.
func (j *journal) check(a *agent) {
	j.f.t.Helper()
	out := j.f.mustFakctl(a, "session", "log", j.sessionID, "-o", "json")
	events, err := parseEvents(out)
	if err != nil {
		j.f.t.Fatalf("session log on %s: %v", a.name, err)
	}
	if err := j.compare(events); err != nil {
		j.f.t.Errorf("session log on %s: %v", a.name, err)
	}
}

// checkPlacement creates a session through one node placed on another and
// checks that every node describes and discovers it the same way, through
// fakctl's JSON and its tables.
func checkPlacement(t *testing.T, f *fleet, sessionID string) {
	t.Helper()
	through, placed := f.agents[0], f.agents[2]
	out := f.mustFakctl(through, "session", "create", "--title", "placed", "--node", placed.name,
		"--model", "m1", "--provider", "p1", "--account-ref", "acct", "-o", "json")
	session := &fakv1.Session{}
	if err := unmarshal(out, session); err != nil {
		t.Fatal(err)
	}
	id := session.GetSessionId()
	want := &fakv1.Placement{RuntimeAdapter: "echo", Provider: "p1", AccountRef: "acct", Model: "m1", Node: placed.name}
	if !proto.Equal(session.GetPlacement(), want) || session.GetHeadSeq() != 2 {
		t.Fatalf("session create --node %s printed %v; want head 2 and placement %v", placed.name, session, want)
	}

	for _, a := range f.agents {
		described := &fakv1.DescribeSessionResponse{}
		if err := unmarshal(f.mustFakctl(a, "session", "describe", id, "-o", "json"), described); err != nil {
			t.Fatal(err)
		}
		s := described.GetSession()
		if s.GetEpoch() != 1 || described.GetComputeNode() != placed.name || !proto.Equal(s.GetPlacement(), want) ||
			s.GetLease() != nil || len(described.GetAttachments()) != 0 || len(described.GetCapabilities().GetControls()) == 0 {
			t.Errorf("session describe on %s: %v", a.name, described)
		}
		for _, c := range described.GetCapabilities().GetControls() {
			if !c.GetAvailable() && c.GetReason() == "" {
				t.Errorf("session describe on %s: control %s is unavailable without a reason", a.name, c.GetName())
			}
		}

		discovered := &fakv1.DiscoverSessionResponse{}
		if err := unmarshal(f.mustFakctl(a, "session", "discover", id, "-o", "json"), discovered); err != nil {
			t.Fatal(err)
		}
		eps := discovered.GetEndpoints()
		if discovered.GetComputeNode() != placed.name || discovered.GetEpoch() != 1 || len(eps) != len(f.agents) ||
			eps[0].GetNode() != placed.name || !slices.Contains(eps[0].GetRoles(), "compute") {
			t.Errorf("session discover on %s: %v", a.name, discovered)
		}
		for _, ep := range eps {
			if b, ok := f.byName[ep.GetNode()]; !ok || ep.GetApiAddr() != b.apiAddr || ep.GetStatus() != "alive" {
				t.Errorf("session discover on %s: endpoint %v", a.name, ep)
			}
		}
	}

	table := f.mustFakctl(f.agents[1], "session", "describe", id)
	for _, line := range []string{
		"Placement:        echo on " + placed.name + ", model m1, provider p1, account acct\n",
		"Compute node:     " + placed.name + "\n",
		"Lease:            none (free to take)\n",
		"Attachments (0):\n",
	} {
		if !strings.Contains(table, line) {
			t.Errorf("session describe table lacks %q:\n%s", line, table)
		}
	}
	table = f.mustFakctl(f.agents[1], "session", "discover", id)
	if !strings.Contains(table, "Compute node: "+placed.name+"\n") || !strings.Contains(table, placed.apiAddr) {
		t.Errorf("session discover table:\n%s", table)
	}
	table = f.mustFakctl(f.agents[1], "session", "list")
	if !strings.Contains(table, "EPOCH") || !regexp.MustCompile(`(?m)^`+id+` +placed +active +1 +`+placed.name+` +- +2 `).MatchString(table) ||
		!regexp.MustCompile(`(?m)^`+sessionID+` +e2e +active +1 +`).MatchString(table) {
		t.Errorf("session list:\n%s", table)
	}
	t.Logf("session %s created through %s runs on %s; every node describes and discovers it alike", id, through.name, placed.name)
}
