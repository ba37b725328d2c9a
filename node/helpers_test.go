package node_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func createSession(t testing.TB, c *testcluster.Cluster, n *testcluster.Node, title string) string {
	t.Helper()
	resp, err := c.Sessions(n).CreateSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.CreateSessionRequest{Title: title}))
	if err != nil {
		t.Fatalf("create session on %s: %v", n.Name, err)
	}
	return resp.Msg.Session.SessionId
}

// appendText appends one note (the kind any client may append; input goes
// through Act and needs the lease) and returns its seq.
func appendText(ctx context.Context, c *testcluster.Cluster, n *testcluster.Node, id, text string) (uint64, error) {
	resp, err := c.Sessions(n).AppendEvents(ctx, connect.NewRequest(&fakv1.AppendEventsRequest{
		SessionId: id, Events: []*fakv1.EventInput{{Kind: "note", Text: text}},
	}))
	if err != nil {
		return 0, err
	}
	return resp.Msg.LastSeq, nil
}

// readAll reads a session's whole journal from node n.
func readAll(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id string, consistency fakv1.ReadConsistency) []*fakv1.Event {
	t.Helper()
	var out []*fakv1.Event
	from := uint64(1)
	for {
		resp, err := c.Sessions(n).ReadEvents(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.ReadEventsRequest{
			SessionId: id, FromSeq: from, Limit: 1000, Consistency: consistency,
		}))
		if err != nil {
			t.Fatalf("read events on %s: %v", n.Name, err)
		}
		out = append(out, resp.Msg.Events...)
		if len(resp.Msg.Events) == 0 || out[len(out)-1].Seq >= resp.Msg.HeadSeq {
			return out
		}
		from = out[len(out)-1].Seq + 1
	}
}

// ackedWrite is an append the cluster acknowledged.
type ackedWrite struct {
	seq  uint64
	text string
}

// checkJournal asserts that every acknowledged write is in the journal at
// its acknowledged address, and that seqs have no gaps.
func checkJournal(t *testing.T, events []*fakv1.Event, acked []ackedWrite) {
	t.Helper()
	bySeq := make(map[uint64]string, len(events))
	for i, ev := range events {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("journal gap: position %d holds seq %d", i, ev.Seq)
		}
		bySeq[ev.Seq] = ev.Text
	}
	for _, w := range acked {
		got, ok := bySeq[w.seq]
		if !ok {
			t.Fatalf("acknowledged event seq %d (%q) is missing", w.seq, w.text)
		}
		if got != w.text {
			t.Fatalf("seq %d holds %q, acknowledged %q", w.seq, got, w.text)
		}
	}
}

func reasonOf(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if info, ok := v.(*fakv1.ErrorInfo); ok {
				return info.Reason
			}
		}
	}
	return ""
}

func text(i int) string { return fmt.Sprintf("event-%04d", i) }
