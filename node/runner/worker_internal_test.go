package runner

import "testing"

func TestOutputWordsAcrossChunks(t *testing.T) {
	for _, tc := range []struct {
		chunks []string
		want   uint64
	}{
		{[]string{"echo: hello"}, 2},
		{[]string{"echo: ", "two words"}, 3},
		{[]string{"ech", "o: hel", "lo"}, 2}, // a word cut between chunks counts once
		{[]string{"a\n", "b\tc  ", " d"}, 4},
		{[]string{"", "  "}, 0},
	} {
		tr := &turn{}
		for _, c := range tc.chunks {
			tr.countOutput(c)
		}
		if got := tr.outputWords(); got != tc.want {
			t.Errorf("%q: %d words, want %d", tc.chunks, got, tc.want)
		}
	}
}

func TestTurnDataAddsFactsAfterTheRunnersKeys(t *testing.T) {
	for _, tc := range []struct {
		facts map[string]any
		want  string
	}{
		{nil, `{"status":"completed","input_seq":7}`},
		{map[string]any{"context_inputs": 3}, `{"status":"completed","input_seq":7,"context_inputs":3}`},
		{map[string]any{"status": "hijacked", "b": "x", "a": []int{1}}, `{"status":"completed","input_seq":7,"a":[1],"b":"x"}`},
		{map[string]any{"bad": func() {}, "ok": true}, `{"status":"completed","input_seq":7,"ok":true}`},
	} {
		if got := string(turnData(turnFact{Status: "completed", InputSeq: 7}, tc.facts)); got != tc.want {
			t.Errorf("facts %v: %s, want %s", tc.facts, got, tc.want)
		}
	}
}

func TestTurnRequestIDIsStablePerInputAndBounded(t *testing.T) {
	a := turnRequestID("run_turn_", "ses_1", 5)
	if a != turnRequestID("run_turn_", "ses_1", 5) {
		t.Fatal("request id not deterministic")
	}
	for _, other := range []string{turnRequestID("run_turn_", "ses_1", 6), turnRequestID("run_turn_", "ses_2", 5), turnRequestID("run_output_", "ses_1", 5)} {
		if other == a {
			t.Fatalf("request ids collide: %s", a)
		}
	}
	long := string(make([]byte, 4096))
	if n := len(turnRequestID("run_output_", long, 1<<63)); n > 64 {
		t.Fatalf("request id of %d bytes", n)
	}
}
