package runner_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

func TestOutputCoalescesAndKeepsEverything(t *testing.T) {
	rt := &runnertest.Turn{}
	o := runner.NewOutput(context.Background(), rt)
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
	got := texts(rt)
	if strings.Join(got, "") != want.String() {
		t.Fatalf("journaled text differs from written text (%d events)", len(got))
	}
	// 8,000 bytes: at least two events (4 KiB cap), far fewer than 2,000.
	if len(got) < 2 || len(got) > 200 {
		t.Fatalf("%d output events for 2,000 writes", len(got))
	}
	for i, s := range got {
		if len(s) > 2*runner.OutputMaxBytes {
			t.Fatalf("event %d holds %d bytes", i, len(s))
		}
	}
}

func TestOutputFlushOrdersBeforeOtherEvents(t *testing.T) {
	rt := &runnertest.Turn{}
	o := runner.NewOutput(context.Background(), rt)
	_ = o.Write("before ")
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	_, _ = rt.Emit(context.Background(), runner.Event{Kind: "tool.call", Text: "ls"})
	_ = o.Write("after")
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	got := texts(rt)
	if strings.Join(got, "|") != "before |ls|after" {
		t.Fatalf("events %q", got)
	}
}

// texts are the texts of the events a turn emitted, in order.
func texts(tr *runnertest.Turn) []string {
	var out []string
	for _, e := range tr.Events() {
		out = append(out, e.Text)
	}
	return out
}
