package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// TestInterruptAgainstARealFleet drives session interrupt and move
// --interrupt through fakctl on a three-node fleet whose echo turns are
// long: a lease held by another client is an error naming it; --steal
// takes it and interrupts the running turn (the next input is answered);
// with no turn running the interrupt is refused (NO_TURN_RUNNING); -o json
// prints the turn.completed; and move --interrupt moves a session with a
// turn in flight at once, the turn closed as interrupted by the move.
func TestInterruptAgainstARealFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an in-process fleet; skipped with -short")
	}
	skipWithoutMoveController(t)
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testcluster.Token)
	const turn = 20 * time.Second // far longer than any step here
	fleet := testcluster.New(t, testcluster.Options{Nodes: 3, EchoTurn: turn, LogLevel: "error"})
	n1 := fleet.Nodes[0]
	addr := n1.APIAddr
	sessions := fleet.Sessions(n1)
	ctx := fleet.Context(3 * time.Minute)
	long := strings.TrimSpace(strings.Repeat("word ", 40))

	create, err := sessions.CreateSession(ctx, connect.NewRequest(&fakv1.CreateSessionRequest{Title: "interrupt"}))
	if err != nil {
		t.Fatal(err)
	}
	id := create.Msg.GetSession().GetSessionId()
	// bob holds the lease and starts a long turn.
	att, err := sessions.Attach(ctx, connect.NewRequest(&fakv1.AttachRequest{SessionId: id, ClientKind: "browser", ClientName: "bob"}))
	if err != nil {
		t.Fatal(err)
	}
	bob := att.Msg.GetAttachmentId()
	if _, err := sessions.TakeLease(ctx, connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: id, AttachmentId: bob})); err != nil {
		t.Fatal(err)
	}
	say := func(text string) uint64 {
		t.Helper()
		r, err := sessions.Act(ctx, connect.NewRequest(&fakv1.ActRequest{SessionId: id, AttachmentId: bob, ExpectedEpoch: epochOf(t, sessions, id),
			Action: &fakv1.ActRequest_Input{Input: &fakv1.InputText{Text: text}}}))
		if err != nil {
			t.Fatal(err)
		}
		return r.Msg.GetSeq()
	}
	running := func(in uint64) {
		t.Helper()
		fleet.WaitFor(20*time.Second, "the turn of the input", func() bool {
			d, err := sessions.DescribeSession(ctx, connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
			return err == nil && d.Msg.GetSession().GetPending().GetTurnInputSeq() == in
		})
	}
	in := say(long)
	running(in)

	code, out, errOut := runCLI(t, addr, "session", "interrupt", id)
	if want := `^Error: the input lease of ` + id + ` is held by browser bob \(` + bob + `\); rerun with --steal to take it\n$`; code != exitError || out != "" || !regexp.MustCompile(want).MatchString(errOut) {
		t.Fatalf("interrupt without --steal: code %d stdout %q stderr %q, want %s", code, out, errOut, want)
	}
	start := time.Now()
	code, out, errOut = runCLI(t, addr, "session", "interrupt", id, "--steal")
	if code != exitOK || errOut != "" || !regexp.MustCompile(`^Interrupted `+id+`: #\d+ turn of input #\d+ interrupted by fakctl \S+\n$`).MatchString(out) {
		t.Fatalf("interrupt --steal: code %d stdout %q stderr %q", code, out, errOut)
	}
	if !strings.Contains(out, "input #"+itoa(in)+" ") {
		t.Errorf("interrupted another turn than input #%d: %q", in, out)
	}
	// fakctl left: its attachment and the lease are gone.
	d, err := sessions.DescribeSession(ctx, connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if s := d.Msg.GetSession(); s.GetPending().GetTurnInputSeq() != 0 || s.GetLease().GetAttachmentId() != "" || len(d.Msg.GetAttachments()) != 1 {
		t.Fatalf("after the interrupt: turn %d, lease %v, %d attachments", s.GetPending().GetTurnInputSeq(), s.GetLease(), len(d.Msg.GetAttachments()))
	}

	code, out, errOut = runCLI(t, addr, "session", "interrupt", id)
	if code != exitError || out != "" || !regexp.MustCompile(`^Error: NO_TURN_RUNNING: no turn is running in session `+id+`\n$`).MatchString(errOut) {
		t.Fatalf("interrupt with no turn: code %d stdout %q stderr %q", code, out, errOut)
	}

	// The session goes on: the next input gets its turn, and the runner
	// of the interrupted one gave up well before its 20 s.
	if _, err := sessions.TakeLease(ctx, connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: id, AttachmentId: bob})); err != nil {
		t.Fatal(err)
	}
	next := say(long)
	running(next)
	if e := time.Since(start); e > turn/2 {
		t.Fatalf("the next turn started %s after the interrupt; the runner did not stop the interrupted one", e)
	}

	// -o json: the turn.completed the fleet wrote.
	code, out, errOut = runCLI(t, addr, "-o", "json", "session", "interrupt", id, "--steal")
	if code != exitOK || errOut != "" {
		t.Fatalf("interrupt -o json: code %d stdout %q stderr %q", code, out, errOut)
	}
	var ev struct {
		Kind string `json:"kind"`
		Data []byte `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &ev); err != nil || ev.Kind != "turn.completed" {
		t.Fatalf("interrupt -o json printed %q (%v)", out, err)
	}
	var fact struct {
		Status   string `json:"status"`
		InputSeq uint64 `json:"input_seq"`
		By       struct {
			ClientKind string `json:"client_kind"`
		} `json:"by"`
	}
	if err := json.Unmarshal(ev.Data, &fact); err != nil || fact.Status != "interrupted" || fact.InputSeq != next || fact.By.ClientKind != "fakctl" {
		t.Fatalf("turn.completed data %s (%v)", ev.Data, err)
	}

	// move --interrupt: a turn in flight does not hold the move up.
	if _, err := sessions.TakeLease(ctx, connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: id, AttachmentId: bob, Steal: true})); err != nil {
		t.Fatal(err)
	}
	third := say(long)
	running(third)
	start = time.Now()
	code, out, errOut = runCLI(t, addr, "session", "move", id, "--to", "n2", "--interrupt", "--safe-point-timeout", "10s")
	if code != exitOK || errOut != "" || !strings.Contains(out, "CUTOVER_COMMITTED") {
		t.Fatalf("move --interrupt: code %d stderr %q\nstdout:\n%s", code, errOut, out)
	}
	if e := time.Since(start); e > turn/2 {
		t.Fatalf("move --interrupt took %s: it waited for the turn", e)
	}
	evs, err := sessions.ReadEvents(ctx, connect.NewRequest(&fakv1.ReadEventsRequest{SessionId: id, FromSeq: third, Limit: 1000}))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs.Msg.GetEvents() {
		if e.GetKind() == "turn.completed" && strings.HasPrefix(e.GetText(), "interrupted by move mov_") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no turn.completed interrupted by the move after #%d", third)
	}
}

func epochOf(t *testing.T, sessions interface {
	DescribeSession(ctx context.Context, req *connect.Request[fakv1.DescribeSessionRequest]) (*connect.Response[fakv1.DescribeSessionResponse], error)
}, id string) uint64 {
	t.Helper()
	d, err := sessions.DescribeSession(context.Background(), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	return d.Msg.GetSession().GetEpoch()
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
