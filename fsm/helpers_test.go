package fsm

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// t0 is the leader-stamped time of the first command in a harness.
const t0 int64 = 1_700_000_000_000_000_000

// tick is how far the harness clock advances per unstamped command.
const tick int64 = 1_000_000 // 1ms

// harness drives an FSM the way raft does: one log entry per apply, with
// increasing indexes, and stamps commands that carry no time like a leader.
type harness struct {
	t     testing.TB
	f     *FSM
	index uint64
	clock int64
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	f, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return &harness{t: t, f: f, clock: t0}
}

// stamp gives every command without a time the next tick of the clock.
// Commands with an explicit time move the clock forward to it.
func (h *harness) stamp(cmds []*fsmpb.Command) {
	for _, c := range cmds {
		if c.RuleVersion == 0 {
			c.RuleVersion = PreferredRuleVersion(c) // a leader of an upgraded fleet
		}
		if c.TimeUnixNano == 0 {
			h.clock += tick
			c.TimeUnixNano = h.clock
		} else if c.TimeUnixNano > h.clock {
			h.clock = c.TimeUnixNano
		}
	}
}

// entry builds the next command log entry holding cmds.
func (h *harness) entry(cmds ...*fsmpb.Command) *raft.Log {
	h.t.Helper()
	h.stamp(cmds)
	data, err := EncodeBatch(cmds)
	if err != nil {
		h.t.Fatalf("EncodeBatch: %v", err)
	}
	return h.rawEntry(raft.LogCommand, data)
}

// rawEntry builds the next log entry with arbitrary type and data.
func (h *harness) rawEntry(typ raft.LogType, data []byte) *raft.Log {
	h.index++
	return &raft.Log{Index: h.index, Term: 1, Type: typ, Data: data}
}

// apply applies cmds as one log entry and returns one result per command.
func (h *harness) apply(cmds ...*fsmpb.Command) []*fsmpb.Result {
	h.t.Helper()
	rs := results(h.t, h.f.Apply(h.entry(cmds...)))
	if len(rs) != len(cmds) {
		h.t.Fatalf("apply: %d results for %d commands", len(rs), len(cmds))
	}
	return rs
}

// apply1 applies a single command in its own entry.
func (h *harness) apply1(c *fsmpb.Command) *fsmpb.Result {
	h.t.Helper()
	return h.apply(c)[0]
}

// results converts an Apply response into results; nil stays nil.
func results(t testing.TB, v interface{}) []*fsmpb.Result {
	t.Helper()
	if v == nil {
		return nil
	}
	rs, ok := v.([]*fsmpb.Result)
	if !ok {
		t.Fatalf("Apply response is %T, want []*fsmpb.Result", v)
	}
	return rs
}

// --- commands ---

func create(id string) *fsmpb.Command {
	return createFull(id, "title "+id, "")
}

func createFull(id, title, objective string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{
		SessionId: id, Title: title, Objective: objective,
	}}}
}

func ev(kind, text string) *fsmpb.EventInput {
	return &fsmpb.EventInput{Kind: kind, Text: text}
}

// appendEv appends events unconditionally.
func appendEv(id string, evs ...*fsmpb.EventInput) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_AppendEvents{AppendEvents: &fsmpb.AppendEvents{
		SessionId: id, Events: evs,
	}}}
}

// appendIf appends events only if the journal head is expected.
func appendIf(id string, expected uint64, evs ...*fsmpb.EventInput) *fsmpb.Command {
	c := appendEv(id, evs...)
	c.GetAppendEvents().ExpectedSeq = proto.Uint64(expected)
	return c
}

func stop(id, reason string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_StopSession{StopSession: &fsmpb.StopSession{
		SessionId: id, Reason: reason,
	}}}
}

// req sets the command's request id.
func req(requestID string, c *fsmpb.Command) *fsmpb.Command {
	c.RequestId = requestID
	return c
}

// at sets the command's leader-stamped time.
func at(t int64, c *fsmpb.Command) *fsmpb.Command {
	c.TimeUnixNano = t
	return c
}

// --- assertions ---

// wantErr fails unless r carries an error with the given reason ("" = no
// error).
func wantErr(t testing.TB, r *fsmpb.Result, reason Reason) {
	t.Helper()
	got := ReasonOf(ResultError(r))
	if got != reason {
		t.Fatalf("result reason = %q, want %q (result %v)", got, reason, r)
	}
	if reason != "" && r.Body != nil {
		t.Fatalf("error result also has a body: %v", r)
	}
	if reason == "" && r.Body == nil {
		t.Fatalf("success result has no body: %v", r)
	}
}

// journal renders a session's whole journal as "seq kind text" lines.
func (h *harness) journal(id string) []string {
	h.t.Helper()
	evs, head, err := h.f.Events(id, 1, 1<<30)
	if err != nil {
		h.t.Fatalf("Events(%q): %v", id, err)
	}
	var out []string
	for i, e := range evs {
		if e.SessionId != id || e.Seq != uint64(i+1) {
			h.t.Fatalf("Events(%q)[%d] = (%q, seq %d), want (%q, seq %d)", id, i, e.SessionId, e.Seq, id, i+1)
		}
		out = append(out, fmt.Sprintf("%d %s %s", e.Seq, e.Kind, e.Text))
	}
	if head != uint64(len(evs)) {
		h.t.Fatalf("Events(%q): head %d, but %d events", id, head, len(evs))
	}
	return out
}

func (h *harness) wantJournal(id string, want ...string) {
	h.t.Helper()
	if got := h.journal(id); !slices.Equal(got, want) {
		h.t.Fatalf("journal of %s:\n got  %q\n want %q", id, got, want)
	}
}

func (h *harness) session(id string) *fsmpb.Session {
	h.t.Helper()
	s, err := h.f.Session(id)
	if err != nil {
		h.t.Fatalf("Session(%q): %v", id, err)
	}
	return s
}

// state is a canonical dump of the replicated state: every bucket except
// the applied index, which every entry advances.
func (h *harness) state() string {
	h.t.Helper()
	return dump(h.t, h.f, false)
}

// dump renders every key and value of every bucket, in bucket and key
// order. It is the logical content of the database, independent of how
// bbolt laid out its pages.
func dump(t testing.TB, f *FSM, withApplied bool) string {
	t.Helper()
	var b strings.Builder
	err := f.view(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			fmt.Fprintf(&b, "[%s]\n", name)
			return bk.ForEach(func(k, v []byte) error {
				if bytes.Equal(name, bucketMeta) && bytes.Equal(k, keyAppliedIndex) && !withApplied {
					return nil
				}
				fmt.Fprintf(&b, "%x = %x\n", k, v)
				return nil
			})
		})
	})
	if err != nil {
		t.Fatalf("dump: %v", err)
	}
	return b.String()
}

// memSink is an in-memory raft.SnapshotSink.
type memSink struct {
	bytes.Buffer
	closed, canceled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.canceled = true; return nil }

var _ raft.SnapshotSink = (*memSink)(nil)

// snapshotBytes persists a snapshot of f and returns its bytes.
func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.closed || sink.canceled {
		t.Fatalf("Persist left sink closed=%v canceled=%v, want closed", sink.closed, sink.canceled)
	}
	return sink.Bytes()
}

func purgeCmd(cause string, stoppedBefore int64, ids ...string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_PurgeSessions{PurgeSessions: &fsmpb.PurgeSessions{
		SessionIds: ids, Cause: cause, StoppedBeforeUnixNano: stoppedBefore, By: "test"}}}
}
