package runner

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// recordingTurn records emitted events.
type recordingTurn struct {
	mu     sync.Mutex
	events []Event
}

func (r *recordingTurn) Emit(_ context.Context, evs ...Event) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, evs...)
	return uint64(len(r.events)), nil
}
func (r *recordingTurn) AwaitApproval(context.Context, uint64) (bool, error) { return false, nil }
func (r *recordingTurn) Charge(context.Context, *fsmpb.Budget) error         { return nil }
func (r *recordingTurn) InputSeq() uint64                                    { return 1 }

func (r *recordingTurn) texts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, e.Text)
	}
	return out
}

func TestOutputCoalescesAndKeepsEverything(t *testing.T) {
	rt := &recordingTurn{}
	o := NewOutput(context.Background(), rt)
	var want strings.Builder
	// 2,000 small writes over about 200 ms: far fewer events than writes.
	for i := range 2000 {
		w := "tok "
		want.WriteString(w)
		if err := o.Write(w); err != nil {
			t.Fatal(err)
		}
		if i%20 == 0 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	got := rt.texts()
	if strings.Join(got, "") != want.String() {
		t.Fatalf("journaled text differs from written text (%d events)", len(got))
	}
	// 8,000 bytes: at least two events (4 KiB cap), far fewer than 2,000.
	if len(got) < 2 || len(got) > 200 {
		t.Fatalf("%d output events for 2,000 writes", len(got))
	}
	for i, s := range got {
		if len(s) > 2*OutputMaxBytes {
			t.Fatalf("event %d holds %d bytes", i, len(s))
		}
	}
}

func TestOutputFlushOrdersBeforeOtherEvents(t *testing.T) {
	rt := &recordingTurn{}
	o := NewOutput(context.Background(), rt)
	_ = o.Write("before ")
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	_, _ = rt.Emit(context.Background(), Event{Kind: "tool.call", Text: "ls"})
	_ = o.Write("after")
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	got := rt.texts()
	if strings.Join(got, "|") != "before |ls|after" {
		t.Fatalf("events %q", got)
	}
}

func TestSplitTextKeepsRunesWhole(t *testing.T) {
	s := strings.Repeat("é", 100) // 2 bytes each
	pieces := splitText([]byte(s), 7)
	if strings.Join(pieces, "") != s {
		t.Fatal("pieces do not join back")
	}
	for _, p := range pieces {
		if len(p) > 7 || !utf8.ValidString(p) {
			t.Fatalf("piece %q", p)
		}
	}
}
