package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/node/testcluster"
)

// TestOpenE2E_Move: a terminal client talks to a session run by the echo
// runner of n1, types /move n2, sees every transition, and keeps talking
// without attaching again: its next input goes to the new epoch and is
// answered by n2's runner. A move to a node without a record is refused
// with a notice, and the client goes on.
func TestOpenE2E_Move(t *testing.T) {
	if _, err := os.Stat(filepath.Join("..", "..", "node", "mover.go")); err != nil {
		t.Skip("the move controller (node/mover.go) is not in this tree yet")
	}
	c := testcluster.New(t, testcluster.Options{Nodes: 3, EchoTurn: 50 * time.Millisecond, LogLevel: "off"})
	n1, n3 := c.Nodes[0], c.Nodes[2]
	nodes := fakv1connect.NewNodeServiceClient(c.HTTPClient(), "http://"+n1.APIAddr, connect.WithInterceptors(apiclient.Bearer(testcluster.Token)))
	c.WaitFor(20*time.Second, "a node record of every node", func() bool {
		r, err := nodes.ListNodes(c.Context(5*time.Second), connect.NewRequest(&fakv1.ListNodesRequest{}))
		return err == nil && len(r.Msg.GetNodes()) == 3
	})
	id := createSessionOn(t, c, n1, "moving", "n1")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	stdin, typing := io.Pipe()
	r := startOpen(ctx, c, n3, stdin, true, id, "--name", "t1")
	defer func() { typing.Close(); r.wait(t) }()
	r.waitOutput(t, "the controls", regexp.MustCompile(`(?m)^  session\.move +/move \[NODE\] +available$`))
	fmt.Fprintln(typing, "hello")
	r.waitOutput(t, "the reply on n1", regexp.MustCompile(`(?m)^#\d+ turn started for input #\d+ \(echo on n1\)\n#\d+ agent> echo: hello`))
	r.waitOutput(t, "the turn's end", regexp.MustCompile(`(?m)^#\d+ turn completed`))

	fmt.Fprintln(typing, "/move n2")
	m := r.waitOutput(t, "the move", regexp.MustCompile(`(?m)^-- moving to n2 \(move (mov_\w+)\); keep typing: input waits in the journal for whichever epoch is current$`))
	moveID := m[1]
	r.waitOutput(t, "every transition", regexp.MustCompile(`(?m)^#\d+ move mov_\w+ requested: n1 → n2 \(operator\); the session runs on n1 until the cutover
#\d+ move: checkpointed at #\d+ \(\+\d+ms\)
#\d+ move: n2 admitted \(alive, not_draining, capacity, adapter, .*\) \(\+\d+ms\)
#\d+ move: restored on n2 as epoch 2; no provider cache to keep \(\+\d+ms\)
#\d+ epoch 2: echo on n2 \(move\)
#\d+ move committed: n1 → n2, epoch 2 \(\+\d+ms\)
-- the session now runs on n2 as epoch 2; this client stays attached and sends to epoch 2$`))

	fmt.Fprintln(typing, "again")
	r.waitOutput(t, "the reply on n2", regexp.MustCompile(`(?m)^#\d+ you> again\n(?:#\d+ charged[^\n]*\n)*#\d+ turn started for input #\d+ \(echo on n2\)\n#\d+ agent> echo: again`))

	fmt.Fprintln(typing, "/move n9")
	r.waitOutput(t, "the refusal", regexp.MustCompile(`(?m)^-- not done: /move n9: NOT_FOUND: node n9 not found \(no node record; fakctl node list shows the nodes\)$`))
	fmt.Fprintln(typing, "/help")
	r.waitOutput(t, "the help", regexp.MustCompile(`(?m)^-- .*/move \[NODE\] its execution`))
	fmt.Fprintln(typing, "still here")
	r.waitOutput(t, "the last reply", regexp.MustCompile(`(?m)^#\d+ agent> echo: still here`))
	r.waitOutput(t, "the last turn's end", regexp.MustCompile(`(?m)^#\d+ turn completed[^\n]*\n(?:.*\n)*#\d+ turn completed[^\n]*\n(?:.*\n)*#\d+ turn completed`))

	typing.Close() // Ctrl-D
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, r.stdout.String(), r.stderr.String())
	}
	out := r.stdout.String()
	if n := strings.Count(out, "you joined"); n != 1 {
		t.Errorf("the client joined %d times, want once (no reattach across the move):\n%s", n, out)
	}
	if r.stderr.String() != "" {
		t.Errorf("stderr: %q", r.stderr.String())
	}
	journal := readJournal(t, c, n1, id)
	checkAddresses(t, out, journal, 1, addresses(out)[len(addresses(out))-1])
	mv, err := c.Sessions(n1).GetMove(c.Context(10*time.Second), connect.NewRequest(&fakv1.GetMoveRequest{SessionId: id}))
	if err != nil || mv.Msg.GetMove().GetMoveId() != moveID || mv.Msg.GetMove().GetState() != "CUTOVER_COMMITTED" {
		t.Fatalf("GetMove: %v %v, want %s committed", err, mv.Msg.GetMove(), moveID)
	}
}
