package checker

import (
	"fmt"
	"strings"
	"testing"
)

func jev(seq uint64, kind, data string) JournalEvent {
	return JournalEvent{Seq: seq, Kind: kind, Data: []byte(data)}
}

func epochJournal() []JournalEvent {
	return []JournalEvent{
		jev(1, "session.created", ""),
		jev(2, "epoch.changed", `{"epoch":1,"placement":{"node":"n1"}}`),
		jev(3, "input", `{}`),
		jev(4, "turn.started", `{"input_seq":3,"node":"n1"}`),
		jev(5, "turn.completed", `{"status":"completed","input_seq":3}`),
		jev(6, "move.requested", `{"move_id":"m1"}`),
		jev(7, "move.checkpointed", `{"move_id":"m1"}`),
		jev(8, "move.admitted", `{"move_id":"m1"}`),
		jev(9, "move.restored", `{"move_id":"m1"}`),
		jev(10, "epoch.changed", `{"epoch":2,"placement":{"node":"n2"}}`),
		jev(11, "move.cutover", `{"move_id":"m1"}`),
		jev(12, "input", `{}`),
		jev(13, "turn.started", `{"input_seq":12,"node":"n2"}`),
	}
}

func TestEpochsAcceptsAMove(t *testing.T) {
	if r := Epochs(map[string][]JournalEvent{"s": epochJournal()}); !r.Ok || r.Moves != 1 || r.Turns != 2 {
		t.Fatal(r.Summary())
	}
}

func TestEpochsCatchesViolations(t *testing.T) {
	cases := map[string]struct {
		mutate func([]JournalEvent) []JournalEvent
		want   string
	}{
		"epoch goes back": {func(j []JournalEvent) []JournalEvent {
			j[9].Data = []byte(`{"epoch":1,"placement":{"node":"n2"}}`)
			return j
		}, "two current epochs"},
		"retired runner writes": {func(j []JournalEvent) []JournalEvent {
			j[12].Data = []byte(`{"input_seq":12,"node":"n1"}`)
			return j
		}, "retired runner"},
		"input run twice": {func(j []JournalEvent) []JournalEvent {
			j[12].Data = []byte(`{"input_seq":3,"node":"n2"}`)
			return j
		}, "started again"},
		"gap": {func(j []JournalEvent) []JournalEvent { return append(j[:4], j[5:]...) }, "address gap"},
		"cutover without restore": {func(j []JournalEvent) []JournalEvent {
			j[8].Kind = "note"
			return j
		}, "without its restore"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			j := c.mutate(epochJournal())
			r := Epochs(map[string][]JournalEvent{"s": j})
			if r.Ok || !strings.Contains(fmt.Sprint(r.Violations), c.want) {
				t.Fatalf("want %q, got %s", c.want, r.Summary())
			}
		})
	}
}
