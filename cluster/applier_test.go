package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Group commit (applier.go) on a one-server in-memory Raft whose FSM the
// test can stall: while the FSM holds the entries in flight, new commands
// queue, and the test sees exactly which commands went into which entry.

// gateFSM answers every command of an entry with a result naming the
// command's request id, and applies nothing while its gate is shut.
type gateFSM struct {
	nopFSM
	gate    chan struct{} // Apply waits for it to be closed
	openOne sync.Once
	short   bool // answer one result too few (a broken FSM)

	mu      sync.Mutex
	entries [][]string // request ids of each applied entry's commands
}

func (f *gateFSM) open() { f.openOne.Do(func() { close(f.gate) }) }

func (f *gateFSM) Apply(l *raft.Log) interface{} {
	<-f.gate
	var b fsmpb.Batch
	if len(l.Data) == 0 || l.Data[0] != byte(fsm.EntryBatch) || proto.Unmarshal(l.Data[1:], &b) != nil {
		panic(fmt.Sprintf("not a fak batch: %x", l.Data))
	}
	var ids []string
	var out []*fsmpb.Result
	for _, c := range b.Commands {
		ids = append(ids, c.RequestId)
		out = append(out, &fsmpb.Result{Body: &fsmpb.Result_Append{Append: &fsmpb.AppendResult{SessionId: "result of " + c.RequestId}}})
	}
	f.mu.Lock()
	f.entries = append(f.entries, ids)
	f.mu.Unlock()
	if f.short {
		out = out[1:]
	}
	return out
}

func (f *gateFSM) applied() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.entries)
}

// entryObserver records the size of every entry the applier proposes.
type entryObserver struct {
	nopObserver
	mu      sync.Mutex
	entries []int
}

func (o *entryObserver) ObserveEntry(n int) {
	o.mu.Lock()
	o.entries = append(o.entries, n)
	o.mu.Unlock()
}

func (o *entryObserver) proposed() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.entries)
}

type applierRig struct {
	a   *applier
	fsm *gateFSM
	obs *entryObserver
}

// newApplierRig starts an applier on a leader whose FSM gate is shut.
func newApplierRig(t *testing.T) *applierRig {
	t.Helper()
	g := &gateFSM{gate: make(chan struct{})}
	n := newMemNode(t, "n1", g, func(c *raft.Config) { c.BatchApplyCh = true })
	newLeader(t, n)
	obs := &entryObserver{}
	raftDown := make(chan struct{})
	a := newApplier(n.raft, raftDown, hclog.NewNullLogger(), obs)
	// Raft first, then the applier, as Cluster.Shutdown does; the gate
	// opens so Raft's FSM goroutine ends.
	t.Cleanup(func() { g.open(); n.raft.Shutdown().Error(); close(raftDown); a.stop() })
	return &applierRig{a: a, fsm: g, obs: obs}
}

func note(id string) *fsmpb.Command {
	return &fsmpb.Command{RequestId: id, Body: &fsmpb.Command_AppendEvents{AppendEvents: &fsmpb.AppendEvents{
		SessionId: "s1", Events: []*fsmpb.EventInput{{Kind: "note", Text: id}},
	}}}
}

// call is one caller's proposal and, once done is closed, its outcome.
type call struct {
	id     string
	cancel context.CancelFunc
	done   chan struct{}
	result *fsmpb.Result
	err    error
}

func (r *applierRig) submit(id string) *call {
	ctx, cancel := context.WithCancel(context.Background())
	c := &call{id: id, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.result, c.err = r.a.submit(ctx, note(id))
	}()
	return c
}

func (c *call) wait(t *testing.T) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer in 10s", c.id)
	}
}

// wantResult fails unless c got the result the FSM gave its own command.
func (c *call) wantResult(t *testing.T) {
	t.Helper()
	c.wait(t)
	if c.err != nil || c.result.GetAppend().GetSessionId() != "result of "+c.id {
		t.Fatalf("%s: result %v, err %v; want its own result", c.id, c.result, c.err)
	}
}

// stall fills Raft with maxInflight one-command entries the shut FSM holds,
// then hands the batcher a plug proposal and waits until the batcher has
// taken it: the batcher now waits for a slot, so every command submitted
// from then on queues, and all of them join the plug's entry once the FSM
// is let go. It returns the lone callers and the plug.
func (r *applierRig) stall(t *testing.T) (lone []*call, plug *proposal) {
	t.Helper()
	for i := range maxInflight {
		lone = append(lone, r.submit(fmt.Sprintf("lone%d", i)))
		waitFor(t, "a lone command proposed", func() bool { return len(r.obs.proposed()) == i+1 })
	}
	if got := r.obs.proposed(); !slices.Equal(got, loneEntries()) || len(r.a.slots) != maxInflight {
		t.Fatalf("entries %v, %d slots taken; want %d lone entries holding every slot", got, len(r.a.slots), maxInflight)
	}
	plug = &proposal{ctx: context.Background(), cmds: []*fsmpb.Command{note("plug")}, size: proto.Size(note("plug")), done: make(chan proposalResult, 1)}
	r.a.queue <- plug
	r.queued(t, 0)
	return lone, plug
}

// loneEntries is what stall proposes: maxInflight entries of one command.
func loneEntries() []int {
	return slices.Repeat([]int{1}, maxInflight)
}

// afterStall is the entries proposed by stall and then the plug's entry,
// which also holds the n commands queued behind it.
func afterStall(n int) []int {
	return append(loneEntries(), 1+n)
}

// queued waits until n commands wait in the queue.
func (r *applierRig) queued(t *testing.T, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d commands queued", n), func() bool { return len(r.a.queue) == n })
}

// A command that finds the applier idle is proposed at once, alone, from
// its caller's goroutine; it is stamped with the leader's time.
func TestApplierLoneCommand(t *testing.T) {
	r := newApplierRig(t)
	r.fsm.open()
	before := time.Now().UnixNano()
	cmd := note("only")
	res, err := r.a.submit(context.Background(), cmd)
	if err != nil || res.GetAppend().GetSessionId() != "result of only" {
		t.Fatalf("submit: %v, %v", res, err)
	}
	if cmd.TimeUnixNano < before || cmd.TimeUnixNano > time.Now().UnixNano() {
		t.Fatalf("command time %d, want the submit's time", cmd.TimeUnixNano)
	}
	if got := r.obs.proposed(); !slices.Equal(got, []int{1}) {
		t.Fatalf("entries proposed %v, want one of 1 command", got)
	}
}

// Commands that arrive while the in-flight entries are full queue and go
// into Raft as one entry; each caller gets its own command's result.
func TestApplierCoalescesQueuedCommands(t *testing.T) {
	r := newApplierRig(t)
	lone, plug := r.stall(t)
	var calls []*call
	for i := range 10 {
		calls = append(calls, r.submit(fmt.Sprintf("q%02d", i)))
	}
	r.queued(t, 10)
	r.fsm.open()
	for _, c := range append(lone, calls...) {
		c.wantResult(t)
	}
	if res := <-plug.done; res.err != nil || len(res.results) != 1 || res.results[0].GetAppend().GetSessionId() != "result of plug" {
		t.Fatalf("plug: %+v", res)
	}
	if got := r.obs.proposed(); !slices.Equal(got, afterStall(10)) {
		t.Fatalf("entries proposed %v, want the lone ones, then the plug and all ten queued commands in one", got)
	}
	entries := r.fsm.applied()
	if len(entries) != maxInflight+1 || len(entries[maxInflight]) != 11 {
		t.Fatalf("entries applied %v", entries)
	}
	got := slices.Sorted(slices.Values(entries[maxInflight]))
	want := []string{"plug"}
	for i := range 10 {
		want = append(want, fmt.Sprintf("q%02d", i))
	}
	if slices.Sort(want); !slices.Equal(got, want) {
		t.Fatalf("the coalesced entry holds %v, want the plug and q00..q09 once each", got)
	}
}

// A caller that gives up while its command waits in the queue gets its
// context's error at once, and its command never reaches the log.
func TestApplierDropsCancelledProposals(t *testing.T) {
	r := newApplierRig(t)
	lone, _ := r.stall(t)
	var calls []*call
	for i := range 10 {
		calls = append(calls, r.submit(fmt.Sprintf("q%02d", i)))
	}
	r.queued(t, 10)
	cancelled := map[string]bool{"q02": true, "q05": true, "q09": true}
	for _, c := range calls {
		if cancelled[c.id] {
			c.cancel()
			c.wait(t)
			if !errors.Is(c.err, context.Canceled) || c.result != nil {
				t.Fatalf("%s cancelled: result %v, err %v; want context.Canceled", c.id, c.result, c.err)
			}
		}
	}
	r.fsm.open()
	for _, c := range append(lone, calls...) {
		if !cancelled[c.id] {
			c.wantResult(t)
		}
	}
	waitFor(t, "the plug's entry applied", func() bool { return len(r.fsm.applied()) == maxInflight+1 })
	last := r.fsm.applied()[maxInflight]
	if len(last) != 8 || slices.ContainsFunc(last, func(id string) bool { return cancelled[id] }) {
		t.Fatalf("the coalesced entry holds %v, want the plug and the seven commands not cancelled", last)
	}
	if got := r.obs.proposed(); !slices.Equal(got, afterStall(7)) {
		t.Fatalf("entries proposed %v", got)
	}
}

// However many commands wait, at most maxInflight entries are in Raft at
// once; the rest queue until one resolves.
func TestApplierBoundsEntriesInFlight(t *testing.T) {
	r := newApplierRig(t)
	lone, _ := r.stall(t)
	var calls []*call
	for i := range 50 {
		calls = append(calls, r.submit(fmt.Sprintf("q%02d", i)))
	}
	r.queued(t, 50)
	if got := r.obs.proposed(); len(got) != maxInflight || len(r.a.slots) != maxInflight {
		t.Fatalf("with 50 commands waiting: entries proposed %v, %d slots taken; want %d", got, len(r.a.slots), maxInflight)
	}
	r.fsm.open()
	for _, c := range append(lone, calls...) {
		c.wantResult(t)
	}
	if got := r.obs.proposed(); !slices.Equal(got, afterStall(50)) {
		t.Fatalf("entries proposed %v", got)
	}
	waitFor(t, "every slot released", func() bool { return len(r.a.slots) == 0 })
}

// Stopping the applier answers every queued command ErrShutdown.
func TestApplierStopAnswersQueued(t *testing.T) {
	r := newApplierRig(t)
	_, plug := r.stall(t)
	var calls []*call
	for i := range 5 {
		calls = append(calls, r.submit(fmt.Sprintf("q%d", i)))
	}
	r.queued(t, 5)
	r.a.stop()
	for _, c := range calls {
		c.wait(t)
		if !errors.Is(c.err, ErrShutdown) {
			t.Fatalf("%s: err %v, want ErrShutdown", c.id, c.err)
		}
	}
	if res := <-plug.done; !errors.Is(res.err, ErrShutdown) {
		t.Fatalf("plug: %+v, want ErrShutdown", res)
	}
	if len(r.a.queue) != 0 {
		t.Fatalf("%d proposals left in the queue", len(r.a.queue))
	}
}

// Raft's errors reach the caller in the cluster's terms, and an FSM answer
// that does not match the entry is an error, not a misrouted result.
func TestApplierErrors(t *testing.T) {
	t.Run("not the leader", func(t *testing.T) {
		n := newMemNode(t, "n1", &gateFSM{gate: make(chan struct{})}, nil) // never bootstrapped
		a := newApplier(n.raft, make(chan struct{}), hclog.NewNullLogger(), nopObserver{})
		t.Cleanup(a.stop)
		if _, err := a.submit(context.Background(), note("x")); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("err %v, want ErrNotLeader", err)
		}
	})
	t.Run("wrong number of results", func(t *testing.T) {
		r := newApplierRig(t)
		r.fsm.short = true
		lone, _ := r.stall(t)
		calls := []*call{r.submit("q0"), r.submit("q1")}
		r.queued(t, 2)
		r.fsm.open()
		for _, c := range append(lone, calls...) {
			c.wait(t)
			if c.err == nil || c.result != nil {
				t.Fatalf("%s: result %v, err %v; want an error", c.id, c.result, c.err)
			}
		}
		if calls[0].err.Error() != "fsm returned 2 results for 3 commands" {
			t.Fatalf("err %q", calls[0].err)
		}
	})
	t.Run("a cancelled context before proposing", func(t *testing.T) {
		r := newApplierRig(t)
		r.fsm.open()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := r.a.submit(ctx, note("x")); !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		if got := r.obs.proposed(); len(got) != 0 {
			t.Fatalf("entries proposed %v for a cancelled command", got)
		}
	})
}
