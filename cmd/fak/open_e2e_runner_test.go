package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/client/journal"
	"github.com/fak-dev/fak/node/testcluster"
)

// scriptRunner plays the runner of sessions placed on scriptNode, like the
// echo adapter but fully under the test's control: each input after the
// session's head when it starts, oldest first, gets a turn. "!tool CMD"
// asks for approval to run CMD and waits for the answer; anything else is
// echoed in two chunks. It follows epoch changes (a fresh) and drops the
// inputs a reset clears.
func scriptRunner(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	base := "http://" + n.APIAddr
	opts := connect.WithInterceptors(apiclient.Bearer(testcluster.Token))
	runner := fakv1connect.NewRunnerServiceClient(c.HTTPClient(), base, opts)
	sessions := fakv1connect.NewSessionServiceClient(c.HTTPClient(), base, opts)
	start, err := sessions.DescribeSession(c.Context(10*time.Second), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatalf("script runner: describe %s: %v", id, err)
	}
	epoch := start.Msg.GetSession().GetEpoch()
	appendEvents := func(evs ...*fakv1.EventInput) (uint64, error) {
		for {
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := runner.AppendRunnerEvents(cctx, connect.NewRequest(&fakv1.AppendRunnerEventsRequest{SessionId: id, Epoch: epoch, Events: evs}))
			ccancel()
			if err == nil || ctx.Err() != nil || !transientErr(err) {
				if err != nil {
					return 0, err
				}
				return resp.Msg.GetLastSeq(), nil
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	ev := func(kind, text string, data any) *fakv1.EventInput {
		e := &fakv1.EventInput{Kind: kind, Text: text}
		if data != nil {
			e.Data, _ = json.Marshal(data)
		}
		return e
	}
	go func() {
		defer close(done)
		var queue []*fakv1.Event
		var waitApproval uint64 // the approval the running turn waits for
		var toolCmd string
		var toolInput uint64
		after := start.Msg.GetSession().GetHeadSeq()
		for ctx.Err() == nil {
			stream, err := sessions.WatchEvents(ctx, connect.NewRequest(&fakv1.WatchEventsRequest{SessionId: id, AfterSeq: after}))
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			for stream.Receive() {
				for _, e := range stream.Msg().GetEvents() {
					after = e.GetSeq()
					switch e.GetKind() {
					case journal.KindInput:
						queue = append(queue, e)
					case journal.KindEpochChanged:
						if f, err := journal.Decode(e); err == nil {
							epoch = max(epoch, f.(journal.EpochChange).Epoch)
						}
					case journal.KindResetBoundary:
						queue = nil
					case journal.KindApprovalAnswered:
						fact, _ := journal.Decode(e)
						f, _ := fact.(journal.ApprovalAnswer)
						if waitApproval == 0 || f.ApprovalSeq != waitApproval {
							continue
						}
						result := "denied: " + toolCmd + " not run"
						if f.Approved {
							result = "ran " + toolCmd
						}
						waitApproval = 0
						if _, err := appendEvents(ev(journal.KindToolResult, result, nil),
							ev(journal.KindTurnCompleted, "", map[string]any{"status": "completed", "input_seq": toolInput})); err != nil {
							return
						}
					}
				}
				for waitApproval == 0 && len(queue) > 0 {
					in := queue[0]
					queue = queue[1:]
					started := ev(journal.KindTurnStarted, "script", map[string]uint64{"input_seq": in.GetSeq()})
					completed := ev(journal.KindTurnCompleted, "", map[string]any{"status": "completed", "input_seq": in.GetSeq()})
					if cmd, ok := strings.CutPrefix(in.GetText(), "!tool "); ok {
						toolCmd, toolInput = cmd, in.GetSeq()
						seq, err := appendEvents(started,
							ev(journal.KindToolCall, "", map[string]string{"tool": "shell", "args": cmd}),
							ev(journal.KindApprovalRequested, "run "+cmd+"?", nil))
						if err != nil {
							return
						}
						waitApproval = seq
						continue
					}
					if _, err := appendEvents(started, ev(journal.KindOutput, "echo: ", nil), ev(journal.KindOutput, in.GetText(), nil), completed); err != nil {
						return
					}
				}
			}
			stream.Close()
		}
	}()
}

// attachOther attaches another client (as a browser would) and, if take,
// takes the input lease for it, renewing it until the test ends.
func attachOther(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id, kind, name string, take bool) string {
	t.Helper()
	cl := c.Sessions(n)
	resp, err := cl.Attach(c.Context(10*time.Second), connect.NewRequest(&fakv1.AttachRequest{SessionId: id, ClientKind: kind, ClientName: name}))
	if err != nil {
		t.Fatalf("attach %s %s: %v", kind, name, err)
	}
	att := resp.Msg.GetAttachmentId()
	if take {
		if _, err := cl.TakeLease(c.Context(10*time.Second), connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: id, AttachmentId: att})); err != nil {
			t.Fatalf("take lease for %s %s: %v", kind, name, err)
		}
	}
	return att
}

func attachmentCount(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id string) int {
	t.Helper()
	resp, err := c.Sessions(n).DescribeSession(c.Context(10*time.Second), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Msg.GetAttachments())
}

// transientErr reports whether a failed call may succeed on a retry: the
// node went away, the connection broke, or the fleet had no leader for a
// moment (the terminal client's own rule, client/term).
func transientErr(err error) bool {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return false
	}
	switch ce.Code() {
	case connect.CodeUnavailable, connect.CodeUnknown, connect.CodeInternal,
		connect.CodeCanceled, connect.CodeDeadlineExceeded, connect.CodeAborted:
		return true
	}
	return false
}
