package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Builders for the attachment, lease and interaction commands, and
// assertions shared by their tests.

// sec is one second in nanoseconds, the unit of TTLs in these tests.
const sec int64 = 1e9

// createdJournal is the journal of a session created by create(id): the
// created event and the first execution epoch.
func createdJournal(id string) []string {
	return []string{"1 session.created title " + id, "2 epoch.changed epoch 1: " + DefaultRuntimeAdapter}
}

// withJournal is createdJournal(id) followed by more lines.
func withJournal(id string, more ...string) []string {
	return append(createdJournal(id), more...)
}

func attachCmd(id, attachment, kind, name string, ttl int64) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_Attach{Attach: &fsmpb.Attach{
		SessionId: id, AttachmentId: attachment, ClientKind: kind, ClientName: name, TtlNanos: ttl,
	}}}
}

// attachT attaches a terminal named after the attachment with a 30s ttl.
func attachT(id, attachment string) *fsmpb.Command {
	return attachCmd(id, attachment, "terminal", "tty-"+attachment, 30*sec)
}

func keepAlive(id, attachment string, ttl int64) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_KeepAlive{KeepAlive: &fsmpb.KeepAlive{
		SessionId: id, AttachmentId: attachment, TtlNanos: ttl,
	}}}
}

func detach(id, attachment, reason string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_Detach{Detach: &fsmpb.Detach{
		SessionId: id, AttachmentId: attachment, Reason: reason,
	}}}
}

func takeLease(id, attachment string, steal bool, ttl int64) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_TakeLease{TakeLease: &fsmpb.TakeLease{
		SessionId: id, AttachmentId: attachment, Steal: steal, TtlNanos: ttl,
	}}}
}

func renewLease(id, attachment string, ttl int64) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_RenewLease{RenewLease: &fsmpb.RenewLease{
		SessionId: id, AttachmentId: attachment, TtlNanos: ttl,
	}}}
}

func releaseLease(id, attachment, reason string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_ReleaseLease{ReleaseLease: &fsmpb.ReleaseLease{
		SessionId: id, AttachmentId: attachment, Reason: reason,
	}}}
}

func submitInput(id, attachment string, epoch uint64, text string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_SubmitInput{SubmitInput: &fsmpb.SubmitInput{
		SessionId: id, AttachmentId: attachment, ExpectedEpoch: epoch, Text: text,
	}}}
}

func interruptTurn(id, attachment string, epoch uint64) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_InterruptTurn{InterruptTurn: &fsmpb.InterruptTurn{
		SessionId: id, AttachmentId: attachment, ExpectedEpoch: epoch,
	}}}
}

func answerApproval(id, attachment string, seq uint64, approved bool, note string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_AnswerApproval{AnswerApproval: &fsmpb.AnswerApproval{
		SessionId: id, AttachmentId: attachment, ApprovalSeq: seq, Approved: approved, Note: note,
	}}}
}

func runnerAppend(id string, epoch uint64, evs ...*fsmpb.EventInput) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_RunnerAppend{RunnerAppend: &fsmpb.RunnerAppend{
		SessionId: id, Epoch: epoch, Events: evs,
	}}}
}

// wantNoOp fails unless r is a successful no-op.
func wantNoOp(t testing.TB, r *fsmpb.Result) {
	t.Helper()
	if r.Error != nil || !r.NoOp {
		t.Fatalf("result = %v, want a no-op", r)
	}
}

// wantErrMsg is wantErr with the message required to contain every part.
func wantErrMsg(t testing.TB, r *fsmpb.Result, reason Reason, parts ...string) {
	t.Helper()
	wantErr(t, r, reason)
	for _, p := range parts {
		if !strings.Contains(r.Error.Message, p) {
			t.Fatalf("error message %q does not mention %q", r.Error.Message, p)
		}
	}
}

// refused applies c, which must fail with reason, and checks that it
// changed nothing at all (no event, no record).
func (h *harness) refused(c *fsmpb.Command, reason Reason) *fsmpb.Result {
	h.t.Helper()
	before := h.state()
	r := h.apply1(c)
	wantErr(h.t, r, reason)
	if after := h.state(); after != before {
		h.t.Fatalf("refused command (%s) changed the state:\n%s", reason, firstDiff(after, before))
	}
	return r
}

// event returns the event at seq of session id.
func (h *harness) event(id string, seq uint64) *fsmpb.Event {
	h.t.Helper()
	evs, _, err := h.f.Events(id, seq, 1)
	if err != nil || len(evs) != 1 || evs[0].Seq != seq {
		h.t.Fatalf("Events(%s, %d) = %v, %v", id, seq, evs, err)
	}
	return evs[0]
}

// eventData decodes the JSON data of the event at seq. Numbers decode as
// json.Number, exactly (nanosecond times do not fit a float64).
func (h *harness) eventData(id string, seq uint64) map[string]any {
	h.t.Helper()
	e := h.event(id, seq)
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(e.Data))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		h.t.Fatalf("event %d (%s) data %q is not JSON: %v", seq, e.Kind, e.Data, err)
	}
	return m
}

// attachment reads an attachment record straight from the database.
func (h *harness) attachment(id, attachment string) *fsmpb.Attachment {
	h.t.Helper()
	var at *fsmpb.Attachment
	_ = h.f.view(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketAttachments).Get(attachmentKey(id, attachment))
		if raw == nil {
			return nil
		}
		at = &fsmpb.Attachment{}
		return proto.Unmarshal(raw, at)
	})
	return at
}

// refusal is a command that must be refused, changing nothing.
type refusal struct {
	name string
	cmd  *fsmpb.Command
	want Reason
}

// refuseAll applies each refusal against h's current state in a subtest.
func (h *harness) refuseAll(t *testing.T, cases []refusal) {
	t.Helper()
	parent := h.t
	defer func() { h.t = parent }()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			h.t = t
			h.refused(tt.cmd, tt.want)
		})
	}
}

// num is n as eventData decodes it.
func num[T ~int64 | ~uint64](n T) json.Number { return json.Number(fmt.Sprint(n)) }
