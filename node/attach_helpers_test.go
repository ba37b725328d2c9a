package node_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// attach registers a client attachment through node n.
func attach(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id, kind, name string) string {
	t.Helper()
	resp, err := c.Sessions(n).Attach(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.AttachRequest{
		SessionId: id, ClientKind: kind, ClientName: name, Capabilities: []string{"input.text", "approval.answer"},
	}))
	if err != nil {
		t.Fatalf("attach %s through %s: %v", name, n.Name, err)
	}
	return resp.Msg.AttachmentId
}

func takeLease(ctx context.Context, c *testcluster.Cluster, n *testcluster.Node, id, att string, steal bool) error {
	_, err := c.Sessions(n).TakeLease(ctx, connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: id, AttachmentId: att, Steal: steal}))
	return err
}

// act submits input text and returns the input event's seq.
func act(ctx context.Context, c *testcluster.Cluster, n *testcluster.Node, id, att string, epoch uint64, text string) (uint64, error) {
	resp, err := c.Sessions(n).Act(ctx, connect.NewRequest(&fakv1.ActRequest{
		SessionId: id, AttachmentId: att, ExpectedEpoch: epoch,
		Action: &fakv1.ActRequest_Input{Input: &fakv1.InputText{Text: text}},
	}))
	if err != nil {
		return 0, err
	}
	return resp.Msg.Seq, nil
}

func mustAct(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id, att, text string) uint64 {
	t.Helper()
	seq, err := act(ctxT(t, 15*time.Second), c, n, id, att, 1, text)
	if err != nil {
		t.Fatalf("act %q through %s: %v", text, n.Name, err)
	}
	return seq
}

// describe reads the session linearizably through node n.
func describe(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id string) *fakv1.Session {
	t.Helper()
	resp, err := c.Sessions(n).DescribeSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatalf("describe on %s: %v", n.Name, err)
	}
	return resp.Msg.Session
}

// waitJournal re-reads the journal from node n until cond holds.
func waitJournal(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id, what string, cond func([]*fakv1.Event) bool) []*fakv1.Event {
	t.Helper()
	var evs []*fakv1.Event
	c.WaitFor(30*time.Second, what, func() bool {
		evs = readAll(t, c, n, id, fakv1.ReadConsistency_READ_CONSISTENCY_STALE)
		return cond(evs)
	})
	return evs
}

// after returns the events with seq > seq.
func after(evs []*fakv1.Event, seq uint64) []*fakv1.Event {
	for i, ev := range evs {
		if ev.Seq > seq {
			return evs[i:]
		}
	}
	return nil
}

func count(evs []*fakv1.Event, kind string) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// fact decodes an event's JSON data.
func fact(t *testing.T, ev *fakv1.Event) map[string]any {
	t.Helper()
	m := map[string]any{}
	if len(ev.Data) > 0 {
		if err := json.Unmarshal(ev.Data, &m); err != nil {
			t.Fatalf("event %d (%s) data %q: %v", ev.Seq, ev.Kind, ev.Data, err)
		}
	}
	return m
}

// transcript renders events as "kind:text" lines, consecutive output
// chunks joined into one reply.
func transcript(evs []*fakv1.Event) string {
	var lines []string
	for _, ev := range evs {
		if ev.Kind == "output" && len(lines) > 0 && strings.HasPrefix(lines[len(lines)-1], "output:") {
			lines[len(lines)-1] += ev.Text
			continue
		}
		lines = append(lines, ev.Kind+":"+ev.Text)
	}
	return strings.Join(lines, "\n")
}

// watcher follows a session through WatchEvents on one node, as one
// attachment, collecting events until closed.
type watcher struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	events []*fakv1.Event
	err    error
	more   chan struct{} // signalled on every received batch
}

func watch(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id, att string, afterSeq uint64) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{cancel: cancel, done: make(chan struct{}), more: make(chan struct{}, 1)}
	t.Cleanup(w.close)
	// The call itself returns only with the first message (the server sends
	// its headers with it), so it runs in the goroutine too; the cursor
	// makes the stream complete wherever it starts.
	go func() {
		defer close(w.done)
		stream, err := c.Sessions(n).WatchEvents(ctx, connect.NewRequest(&fakv1.WatchEventsRequest{
			SessionId: id, AttachmentId: att, AfterSeq: afterSeq,
		}))
		if err != nil {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			return
		}
		defer stream.Close()
		for stream.Receive() {
			w.mu.Lock()
			w.events = append(w.events, stream.Msg().Events...)
			w.mu.Unlock()
			select {
			case w.more <- struct{}{}:
			default:
			}
		}
		w.mu.Lock()
		w.err = stream.Err()
		w.mu.Unlock()
	}()
	return w
}

func (w *watcher) close() {
	w.cancel()
	<-w.done
}

func (w *watcher) snapshot() ([]*fakv1.Event, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*fakv1.Event(nil), w.events...), w.err
}

// waitFor waits until the events received satisfy cond, or fails the test
// if the stream ends or the deadline passes first.
func (w *watcher) waitFor(t *testing.T, what string, cond func([]*fakv1.Event) bool) []*fakv1.Event {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		evs, _ := w.snapshot()
		if cond(evs) {
			return evs
		}
		select {
		case <-w.more:
		case <-w.done:
			evs, err := w.snapshot()
			if cond(evs) {
				return evs
			}
			t.Fatalf("watch ended before %s: %v (%d events)", what, err, len(evs))
		case <-deadline.C:
			t.Fatalf("timed out waiting for the watcher to see %s (%d events)", what, len(evs))
		}
	}
}
