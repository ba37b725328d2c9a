package fsm

import (
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Builders for the budget, reset-ledger and launch commands, and reads of
// the records they keep, shared by ledger_test.go, budget_test.go and
// launch_test.go.

// createPolicy is create(id) with a budget policy.
func createPolicy(id string, p *fsmpb.Policy) *fsmpb.Command {
	c := create(id)
	c.GetCreateSession().Policy = p
	return c
}

// budgetPolicy is a policy with the given envelope limits and context cap.
func budgetPolicy(b *fsmpb.Budget, contextCap uint64) *fsmpb.Policy {
	return &fsmpb.Policy{Limits: b, ContextCap: contextCap}
}

func recordUsage(id string, usage *fsmpb.Budget, contextTokens uint64) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_RecordUsage{RecordUsage: &fsmpb.RecordUsage{
		SessionId: id, Usage: usage, ContextTokens: contextTokens,
	}}}
}

// spend charges only spend (micros): the axis most tests use.
func spend(id string, micros uint64) *fsmpb.Command {
	return recordUsage(id, &fsmpb.Budget{SpendMicros: micros}, 0)
}

// contextUse charges only context tokens.
func contextUse(id string, tokens uint64) *fsmpb.Command {
	return recordUsage(id, nil, tokens)
}

// launchUsage charges a launch's default session (no trace id).
func launchUsage(launch string, usage *fsmpb.Budget, contextTokens uint64) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_RecordUsage{RecordUsage: &fsmpb.RecordUsage{
		LaunchId: launch, Usage: usage, ContextTokens: contextTokens,
	}}}
}

func fresh(id, providerSessionID string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_FreshSession{FreshSession: &fsmpb.FreshSession{
		SessionId: id, ProviderSessionId: providerSessionID,
	}}}
}

func reset(id, providerSessionID string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_ResetSession{ResetSession: &fsmpb.ResetSession{
		SessionId: id, ProviderSessionId: providerSessionID,
	}}}
}

func clearCmd(id, source, reason, provider, providerSessionID string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_ClearSession{ClearSession: &fsmpb.ClearSession{
		SessionId: id, Source: source, Reason: reason, Provider: provider, ProviderSessionId: providerSessionID,
	}}}
}

func forkCmd(source string, atSeq uint64, forkID, providerSessionID string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_ForkSession{ForkSession: &fsmpb.ForkSession{
		SourceSessionId: source, AtSeq: atSeq, ForkSessionId: forkID, ProviderSessionId: providerSessionID,
	}}}
}

// externalPlacement is the placement of a session launch serves, as the
// API creates a guarded session (host laptop).
func externalPlacement(launch, provider string) *fsmpb.Placement {
	return &fsmpb.Placement{RuntimeAdapter: ExternalRuntime, Provider: provider, LaunchId: launch, Host: "laptop"}
}

// createExternal creates id as the API creates a guarded launch's session:
// on the external runtime of launch, on host laptop.
func createExternal(id, launch, provider string, p *fsmpb.Policy) *fsmpb.Command {
	c := createPolicy(id, p)
	c.GetCreateSession().Placement = externalPlacement(launch, provider)
	return c
}

// bindLaunch binds launch to id from host laptop.
func bindLaunch(launch, provider, id string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_BindLaunch{BindLaunch: &fsmpb.BindLaunch{
		LaunchId: launch, Provider: provider, SessionId: id, Host: "laptop",
	}}}
}

// hookStart is a SessionStart hook of a launch (provider taken from the
// launch).
func hookStart(launch, source, providerSessionID string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_ProviderSessionStart{ProviderSessionStart: &fsmpb.ProviderSessionStart{
		LaunchId: launch, Source: source, ProviderSessionId: providerSessionID,
	}}}
}

// hookEnd is a SessionEnd hook of a launch.
func hookEnd(launch, reason, providerSessionID string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_ProviderSessionEnd{ProviderSessionEnd: &fsmpb.ProviderSessionEnd{
		LaunchId: launch, Reason: reason, ProviderSessionId: providerSessionID,
	}}}
}

// withMetadata sets the hook metadata of a SessionStart or SessionEnd.
func withMetadata(c *fsmpb.Command, metadata string) *fsmpb.Command {
	switch b := c.Body.(type) {
	case *fsmpb.Command_ProviderSessionStart:
		b.ProviderSessionStart.Metadata = []byte(metadata)
	case *fsmpb.Command_ProviderSessionEnd:
		b.ProviderSessionEnd.Metadata = []byte(metadata)
	}
	return c
}

// --- reads ---

func (h *harness) envelope(id string) *fsmpb.Envelope {
	h.t.Helper()
	e, err := h.f.Envelope(id)
	if err != nil {
		h.t.Fatalf("Envelope(%q): %v", id, err)
	}
	return e
}

func (h *harness) launch(id string) *fsmpb.Launch {
	h.t.Helper()
	l, err := h.f.Launch(id)
	if err != nil {
		h.t.Fatalf("Launch(%q): %v", id, err)
	}
	return l
}

func (h *harness) children(id string) []*fsmpb.LineageEdge {
	h.t.Helper()
	edges, err := h.f.Children(id)
	if err != nil {
		h.t.Fatalf("Children(%q): %v", id, err)
	}
	return edges
}

// sessionCount is the number of session records.
func (h *harness) sessionCount() int {
	h.t.Helper()
	all, _, err := h.f.Sessions("", 1<<20)
	if err != nil {
		h.t.Fatalf("Sessions: %v", err)
	}
	return len(all)
}

// countKind counts the events of a kind in a session's journal.
func (h *harness) countKind(id, kind string) int {
	h.t.Helper()
	evs, _, err := h.f.Events(id, 1, 1<<30)
	if err != nil {
		h.t.Fatalf("Events(%q): %v", id, err)
	}
	n := 0
	for _, e := range evs {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// poke rewrites a stored session record, standing in for state only a
// restored snapshot (or a later writer) could produce.
func (h *harness) poke(id string, fn func(s *fsmpb.Session)) {
	h.t.Helper()
	s := h.session(id)
	fn(s)
	buf, err := proto.Marshal(s)
	if err != nil {
		h.t.Fatalf("marshal: %v", err)
	}
	h.f.mu.RLock()
	defer h.f.mu.RUnlock()
	if err := h.f.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSessions).Put([]byte(id), buf)
	}); err != nil {
		h.t.Fatalf("poke %s: %v", id, err)
	}
}

// --- assertions ---

// wantBoundary fails unless r is a successful, non-no-op boundary with the
// action and the sessions given, and returns the session in force.
func wantBoundary(t testing.TB, r *fsmpb.Result, action, session, previous string) *fsmpb.Session {
	t.Helper()
	wantErr(t, r, "")
	b := r.GetBoundary()
	if b == nil || r.NoOp || b.Action != action || b.Session.GetSessionId() != session || b.PreviousSession != previous {
		t.Fatalf("result %v, want boundary %s to %s (previous %q)", r, action, session, previous)
	}
	return b.Session
}

// wantNoOpBoundary fails unless r is a no-op boundary naming session.
func wantNoOpBoundary(t testing.TB, r *fsmpb.Result, session string) {
	t.Helper()
	wantNoOp(t, r)
	if b := r.GetBoundary(); b == nil || b.Action != "no_op" || b.Session.GetSessionId() != session {
		t.Fatalf("no-op result %v, want session %s", r, session)
	}
}

// wantUnchanged fails unless the state equals before.
func (h *harness) wantUnchanged(before, what string) {
	h.t.Helper()
	if after := h.state(); after != before {
		h.t.Fatalf("%s changed the state:\n%s", what, firstDiff(after, before))
	}
}

// wantUsed fails unless the envelope's used budget is want.
func (h *harness) wantUsed(envelope string, want *fsmpb.Budget) {
	h.t.Helper()
	if got := h.envelope(envelope).Used; !proto.Equal(got, want) {
		h.t.Fatalf("envelope %s used %v, want %v", envelope, got, want)
	}
}

// kinds lists the kinds of a session's journal from seq on.
func (h *harness) kinds(id string, from uint64) []string {
	h.t.Helper()
	evs, _, err := h.f.Events(id, from, 1<<30)
	if err != nil {
		h.t.Fatalf("Events(%q): %v", id, err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

func (h *harness) wantKinds(id string, from uint64, want ...string) {
	h.t.Helper()
	if got := h.kinds(id, from); !slices.Equal(got, want) {
		h.t.Fatalf("kinds of %s from #%d = %q, want %q", id, from, got, want)
	}
}
