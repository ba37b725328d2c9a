package checker

import (
	"strings"
	"testing"
)

func TestTurnsAnsweredOnce(t *testing.T) {
	ok := []JournalEvent{
		jev(1, "session.created", ""), jev(2, "epoch.changed", `{"epoch":1}`),
		jev(3, "input", ""), jev(4, "turn.started", `{"input_seq":3}`), jev(5, "output", ""),
		jev(6, "input", ""),
		// epoch 1's node died mid-turn; epoch 2 closes the turn and answers the next input.
		jev(7, "epoch.changed", `{"epoch":2}`), jev(8, "turn.completed", `{"input_seq":3,"status":"interrupted"}`),
		jev(9, "turn.started", `{"input_seq":6}`), jev(10, "output", ""), jev(11, "turn.completed", `{"input_seq":6,"status":"completed"}`),
	}
	if r := Turns(map[string][]JournalEvent{"s": ok}); !r.Ok || r.Answered != 2 || r.Interrupted != 1 {
		t.Fatalf("%+v", r)
	}
	for name, tc := range map[string]struct {
		evs  []JournalEvent
		want string
	}{
		"answered twice":              {append(ok[:11:11], jev(12, "turn.started", `{"input_seq":6}`), jev(13, "turn.completed", `{"input_seq":6,"status":"completed"}`)), "answered twice"},
		"two epochs":                  {[]JournalEvent{jev(1, "epoch.changed", `{"epoch":1}`), jev(2, "input", ""), jev(3, "turn.started", `{"input_seq":2}`), jev(4, "epoch.changed", `{"epoch":2}`), jev(5, "output", "")}, "written in epoch 2"},
		"completed by the next epoch": {[]JournalEvent{jev(1, "epoch.changed", `{"epoch":1}`), jev(2, "input", ""), jev(3, "turn.started", `{"input_seq":2}`), jev(4, "epoch.changed", `{"epoch":2}`), jev(5, "turn.completed", `{"input_seq":2,"status":"completed"}`)}, "answered (completed) in epoch 2"},
		"unanswered":                  {ok[:6], "input #6 was never answered"},
	} {
		r := Turns(map[string][]JournalEvent{"s": tc.evs})
		if r.Ok || !strings.Contains(strings.Join(r.Violations, "\n"), tc.want) {
			t.Errorf("%s: want %q in %v", name, tc.want, r.Violations)
		}
	}
}
