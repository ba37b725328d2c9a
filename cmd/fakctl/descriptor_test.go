package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
)

func TestAppendableKindsAreTheFSMs(t *testing.T) {
	for _, kind := range appendableKinds {
		if !fsm.AppendableKind(kind) {
			t.Errorf("fakctl lists %q as appendable; the FSM refuses it", kind)
		}
	}
	if appendableKinds[0] != fsm.KindNote {
		t.Errorf("default kind %q, want %q", appendableKinds[0], fsm.KindNote)
	}
	for _, kind := range []string{fsm.KindInput, fsm.KindOutput, fsm.KindTurnStarted, fsm.KindLeaseTaken, fsm.KindSessionCreated} {
		if slices.Contains(appendableKinds, kind) {
			t.Errorf("fakctl lists %q as appendable; only fak or runners write it", kind)
		}
	}
	if defaultAdapter != fsm.DefaultRuntimeAdapter {
		t.Errorf("default adapter %q, the FSM's is %q", defaultAdapter, fsm.DefaultRuntimeAdapter)
	}
}

func TestSessionCreatePlacement(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newFakeFleet()
	url := fleet.start(t)

	code, out, errOut := runCLI(t, url, "session", "create", "--title", "placed", "--node", "n2",
		"--adapter", "claude", "--model", "opus", "--provider", "anthropic", "--account-ref", "team-a")
	if code != exitOK || out != "s-1\n" {
		t.Fatalf("create: code %d stdout %q stderr %q", code, out, errOut)
	}
	want := &fakv1.Placement{RuntimeAdapter: "claude", Provider: "anthropic", AccountRef: "team-a", Model: "opus", Node: "n2"}
	if got := fleet.lastCreate.GetPlacement(); !proto.Equal(got, want) {
		t.Errorf("placement sent = %v, want %v", got, want)
	}

	// Without flags: the echo adapter, and no node (the receiving node decides).
	code, out, errOut = runCLI(t, url, "-o", "json", "session", "create", "--title", "default")
	if code != exitOK {
		t.Fatalf("create: code %d stderr %q", code, errOut)
	}
	want = &fakv1.Placement{RuntimeAdapter: "echo"}
	if got := fleet.lastCreate.GetPlacement(); !proto.Equal(got, want) {
		t.Errorf("placement sent = %v, want %v", got, want)
	}
	created := &fakv1.Session{}
	if err := protojson.Unmarshal([]byte(out), created); err != nil {
		t.Fatalf("create -o json: %v\n%s", err, out)
	}
	if created.GetHeadSeq() != 2 || created.GetEpoch() != 1 || created.GetPlacement().GetNode() != "n1" {
		t.Errorf("created session = %v; want head 2, epoch 1 on n1", created)
	}
}

// describedFleet is a fleet with one session that has a lease holder, two
// attachments, pending interaction and a capability set.
func describedFleet(t *testing.T, now time.Time) (*fakeFleet, string) {
	t.Helper()
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newFakeFleet()
	url := fleet.start(t)
	if code, _, errOut := runCLI(t, url, "session", "create", "--title", "demo", "--objective", "talk", "--node", "n2", "--model", "m1"); code != exitOK {
		t.Fatalf("create: %s", errOut)
	}
	at := func(d time.Duration) int64 { return now.Add(d).UnixNano() }
	fleet.mu.Lock()
	defer fleet.mu.Unlock()
	s := fleet.sessions["s-1"]
	s.HeadSeq = 9
	s.TurnsCompleted = 1
	s.UpdatedUnixNano = eventTime(9).UnixNano()
	s.Pending = &fakv1.PendingInteraction{QueuedInputs: []uint64{8, 9}, TurnInputSeq: 6, ApprovalSeq: 7}
	s.Lease = &fakv1.Lease{AttachmentId: "att-1", ClientKind: "terminal", ClientName: "alice",
		TakenUnixNano: at(-3 * time.Second), ExpiresUnixNano: at(12 * time.Second)}
	s.AttachmentCount = 2
	s.ContextCap, s.ContextUsed = 1000, 250
	s.Provider, s.ProviderSessionId = "claude", "prov-2"
	s.ParentSession, s.BoundarySource = "s-0", "clear"
	s.ResetSeq = 5
	s.EnvelopeId = "env-1"
	fleet.budget = &fakv1.Envelope{
		EnvelopeId: "env-1", ElapsedMs: 65_400, Sessions: 2, Refusals: 1, Priority: "high",
		Limits:    &fakv1.Budget{Turns: 10, SpendMicros: 2_000_000},
		Used:      &fakv1.Budget{Turns: 10, OutputTokens: 1234, SpendMicros: 1_500_000},
		Remaining: &fakv1.Budget{SpendMicros: 500_000},
	}
	fleet.attachments["s-1"] = []*fakv1.Attachment{
		{AttachmentId: "att-1", ClientKind: "terminal", ClientName: "alice", Node: "n1",
			Capabilities: []string{"input.text", "approval.answer"}, JoinedUnixNano: at(-time.Minute),
			SeenUnixNano: at(-time.Second), ExpiresUnixNano: at(29 * time.Second), Present: true, HoldsLease: true},
		{AttachmentId: "att-2", ClientKind: "browser", Node: "n3",
			JoinedUnixNano: at(-time.Minute), SeenUnixNano: at(-40 * time.Second), ExpiresUnixNano: at(-10 * time.Second)},
	}
	fleet.meteredBy = "gateway"
	fleet.capabilities = &fakv1.CapabilitySet{Version: 1, Controls: []*fakv1.Control{
		{Name: "input.text", Reason: "LEASE_NOT_HELD", Message: "the input lease is held by terminal alice", Handoff: "lease.steal"},
		{Name: "lease.steal", Available: true},
		{Name: "session.stop", Available: true},
	}}
	return fleet, url
}

func TestSessionDescribeShowsTheDescriptor(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 5, 0, 0, time.UTC)
	defer func(old func() time.Time) { timeNow = old }(timeNow)
	timeNow = func() time.Time { return now }
	fleet, url := describedFleet(t, now)
	clock := func(d time.Duration) string { return formatClock(now.Add(d).UnixNano()) }

	code, out, errOut := runCLI(t, url, "session", "describe", "s-1", "--attachment", "att-2")
	if code != exitOK {
		t.Fatalf("describe: code %d stderr %q", code, errOut)
	}
	if got := fleet.describedAs[len(fleet.describedAs)-1]; got != "att-2" {
		t.Errorf("DescribeSession attachment_id = %q, want att-2", got)
	}
	wantFields := [][2]string{
		{"ID", "s-1"},
		{"Title", "demo"},
		{"Objective", "talk"},
		{"State", "active"},
		{"Epoch", "1"},
		{"Placement", "echo on n2, model m1"},
		{"Compute node", "n2"},
		{"Metered by", "gateway (the compute node's gateway charges every model call)"},
		{"Head", "9 (address s-1@9)"},
		{"Turns completed", "1"},
		{"Queued inputs", "seqs 8, 9"},
		{"Running turn", "on the input at seq 6"},
		{"Pending approval", "awaiting an answer to the request at seq 7"},
		{"Lease", "terminal alice (att-1), taken " + clock(-3*time.Second) + ", expires " + clock(12*time.Second) + " (in 12s)"},
		{"Context", "250 of 1000 tokens used (750 left)"},
		{"Context reset", "at seq 5 (the model context starts after it)"},
		{"Provider", "claude, provider session prov-2"},
		{"Lineage", "clear of s-0"},
		{"Created", formatTime(eventTime(0).UnixNano())},
		{"Updated", formatTime(eventTime(9).UnixNano())},
	}
	var want strings.Builder
	if err := writeFields(&want, wantFields); err != nil {
		t.Fatal(err)
	}
	want.WriteString("\nBudget (envelope env-1, shared by 2 sessions, 1m5s elapsed, 1 refusal, priority high):\n")
	writeTable(&want, []string{"AXIS", "LIMIT", "USED", "REMAINING"}, [][]string{
		{"turns", "10", "10", "0 (exhausted)"},
		{"output tokens", "unlimited", "1234", ""},
		{"queries", "unlimited", "0", ""},
		{"spend", "2", "1.5", "0.5"},
		{"tool calls", "unlimited", "0", ""},
	})
	want.WriteString("\nAttachments (2):\n")
	writeTable(&want, []string{"ID", "CLIENT", "NODE", "PRESENT", "LEASE", "JOINED", "SEEN", "EXPIRES", "CAPABILITIES"}, [][]string{
		{"att-1", "terminal alice", "n1", "yes", "holder", clock(-time.Minute), clock(-time.Second), clock(29 * time.Second), "input.text,approval.answer"},
		{"att-2", "browser", "n3", "no", "", clock(-time.Minute), clock(-40 * time.Second), clock(-10 * time.Second), ""},
	})
	want.WriteString("\nControls (capability set v1, as seen by attachment att-2):\n")
	writeTable(&want, []string{"CONTROL", "AVAILABLE", "REASON", "MESSAGE", "HANDOFF"}, [][]string{
		{"input.text", "no", "LEASE_NOT_HELD", "the input lease is held by terminal alice", "lease.steal"},
		{"lease.steal", "yes", "", "", ""},
		{"session.stop", "yes", "", "", ""},
	})
	if out != want.String() {
		t.Errorf("describe:\n%s\nwant:\n%s", out, want.String())
	}
	for _, line := range []string{
		"Lease:            terminal alice (att-1)",
		"att-1   terminal alice   n1     yes       holder",
		"input.text     no          LEASE_NOT_HELD   the input lease is held by terminal alice   lease.steal",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("describe output lacks %q:\n%s", line, out)
		}
	}

	// -o json is the whole descriptor.
	code, out, errOut = runCLI(t, url, "-o", "json", "session", "describe", "s-1")
	got := &fakv1.DescribeSessionResponse{}
	if err := protojson.Unmarshal([]byte(out), got); code != exitOK || err != nil {
		t.Fatalf("describe -o json: code %d err %v stderr %q\n%s", code, err, errOut, out)
	}
	if got.GetSession().GetLease().GetAttachmentId() != "att-1" || len(got.GetAttachments()) != 2 ||
		len(got.GetCapabilities().GetControls()) != 3 || got.GetComputeNode() != "n2" ||
		!slices.Equal(got.GetSession().GetPending().GetQueuedInputs(), []uint64{8, 9}) {
		t.Errorf("describe -o json = %v", got)
	}
	if got := fleet.describedAs[len(fleet.describedAs)-1]; got != "" {
		t.Errorf("DescribeSession without --attachment sent attachment_id %q", got)
	}

	code, _, errOut = runCLI(t, url, "session", "describe", "s-404")
	if code != exitError || errOut != "Error: NOT_FOUND: session s-404 not found\n" {
		t.Errorf("describe unknown: code %d stderr %q", code, errOut)
	}
}

func TestSessionDescribeIdleSession(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	url := newFakeFleet().start(t)
	runCLI(t, url, "session", "create", "--title", "idle")
	code, out, errOut := runCLI(t, url, "session", "describe", "s-1")
	if code != exitOK {
		t.Fatalf("describe: code %d stderr %q", code, errOut)
	}
	for _, line := range []string{
		"Placement:        echo on n1\n",
		"Head:             2 (address s-1@2)\n",
		"Queued inputs:    none\n",
		"Running turn:     none\n",
		"Pending approval: none\n",
		"Lease:            none (free to take)\n",
		"Context:          0 tokens used (no cap)\n",
		"Context reset:    none\n",
		"Provider:         none bound\n",
		"Lineage:          root (no parent)\n",
		"\nAttachments (0):\n  none\n",
		"\nControls (capability set v0, as seen by an observer (--attachment ID for an attachment's view)):\n  none\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("describe output lacks %q:\n%s", line, out)
		}
	}
}

func TestLeaseFormatting(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 5, 0, 0, time.UTC)
	expired := &fakv1.Lease{AttachmentId: "att-9", ClientKind: "browser", ExpiresUnixNano: now.Add(-4 * time.Second).UnixNano()}
	if got, want := formatLease(expired, now), "browser (att-9), expired "+formatClock(expired.ExpiresUnixNano)+" (4s ago; free to take)"; got != want {
		t.Errorf("expired lease: %q, want %q", got, want)
	}
	if got := leaseHolder(expired, now.UnixNano()); got != "" {
		t.Errorf("expired lease holder = %q, want none", got)
	}
	live := &fakv1.Lease{AttachmentId: "att-1", ExpiresUnixNano: now.Add(time.Second).UnixNano()}
	if got := leaseHolder(live, now.UnixNano()); got != "att-1" {
		t.Errorf("unnamed holder = %q, want its attachment id", got)
	}
	if got := leaseHolder(nil, now.UnixNano()); got != "" {
		t.Errorf("no lease: holder %q", got)
	}
}

func TestSessionListShowsEpochNodeAndLease(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 5, 0, 0, time.UTC)
	defer func(old func() time.Time) { timeNow = old }(timeNow)
	timeNow = func() time.Time { return now }
	fleet, url := describedFleet(t, now)
	runCLI(t, url, "session", "create", "--title", "second")
	fleet.mu.Lock()
	fleet.sessions["s-2"].State = fakv1.SessionState_SESSION_STATE_STOPPED
	fleet.mu.Unlock()

	code, out, errOut := runCLI(t, url, "session", "list")
	var want strings.Builder
	writeTable(&want, []string{"ID", "TITLE", "STATE", "EPOCH", "NODE", "LEASE", "HEAD", "CREATED"}, [][]string{
		{"s-1", "demo", "active", "1", "n2", "terminal alice", "9", formatTime(eventTime(0).UnixNano())},
		{"s-2", "second", "stopped", "1", "n1", "", "2", formatTime(eventTime(0).UnixNano())},
	})
	if code != exitOK || out != want.String() {
		t.Errorf("list: code %d stderr %q\n%s\nwant:\n%s", code, errOut, out, want.String())
	}

	code, out, _ = runCLI(t, url, "-o", "json", "session", "list")
	if code != exitOK || !strings.Contains(out, `"attachmentId": "att-1"`) || !strings.Contains(out, `"node": "n2"`) {
		t.Errorf("list -o json: code %d\n%s", code, out)
	}
}

func TestSessionDiscover(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	fleet := newFakeFleet()
	url := fleet.start(t)
	runCLI(t, url, "session", "create", "--title", "demo", "--node", "n2")
	fleet.endpoints = []*fakv1.Endpoint{
		{Node: "n2", ApiAddr: "10.0.0.2:7401", Roles: []string{"compute"}, Status: "alive"},
		{Node: "n1", ApiAddr: "10.0.0.1:7401", Roles: []string{"leader"}, Status: "alive"},
		{Node: "n3", ApiAddr: "10.0.0.3:7401", Roles: []string{"replica"}, Status: "dead"},
	}

	code, out, errOut := runCLI(t, url, "session", "discover", "s-1")
	want := "Session:      s-1\n" +
		"Epoch:        1\n" +
		"Placement:    echo on n2\n" +
		"Compute node: n2\n" +
		"\nEndpoints (3):\n" +
		"NODE   API_ADDRESS     ROLES     STATUS\n" +
		"n2     10.0.0.2:7401   compute   alive\n" +
		"n1     10.0.0.1:7401   leader    alive\n" +
		"n3     10.0.0.3:7401   replica   dead\n"
	if code != exitOK || out != want {
		t.Errorf("discover: code %d stderr %q\n%s\nwant:\n%s", code, errOut, out, want)
	}

	code, out, _ = runCLI(t, url, "-o", "json", "session", "discover", "s-1")
	got := &fakv1.DiscoverSessionResponse{}
	if err := protojson.Unmarshal([]byte(out), got); code != exitOK || err != nil {
		t.Fatalf("discover -o json: code %d err %v\n%s", code, err, out)
	}
	if got.GetComputeNode() != "n2" || got.GetEpoch() != 1 || len(got.GetEndpoints()) != 3 || got.GetEndpoints()[0].GetApiAddr() != "10.0.0.2:7401" {
		t.Errorf("discover -o json = %v", got)
	}

	code, out, errOut = runCLI(t, url, "session", "discover")
	if code != exitUsage || out != "" || !strings.HasPrefix(errOut, "Error: missing argument ID\n") {
		t.Errorf("discover without ID: code %d stdout %q stderr %q", code, out, errOut)
	}
}
