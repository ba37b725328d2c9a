package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

func millisSince(from, to time.Time) float64 {
	if from.IsZero() || to.IsZero() {
		return 0
	}
	return float64(to.Sub(from)) / float64(time.Millisecond)
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func maxAckedSeq(calls []appendCall) uint64 {
	var m uint64
	for _, c := range calls {
		m = max(m, c.seq)
	}
	return m
}

// stats summarizes a list of figures.
type stats struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
}

func summarize(values []float64) stats {
	if len(values) == 0 {
		return stats{}
	}
	s := slices.Clone(values)
	sort.Float64s(s)
	st := stats{N: len(s), Min: s[0], Max: s[len(s)-1]}
	if len(s)%2 == 1 {
		st.Median = s[len(s)/2]
	} else {
		st.Median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	for _, v := range s {
		st.Mean += v
	}
	st.Mean /= float64(len(s))
	return st
}

// readJournal reads a session's whole journal through agent a with a
// linearizable read, page by page.
func readJournal(clients *apiClients, a *agent, sessionID string) ([]*fakv1.Event, error) {
	var events []*fakv1.Event
	from := uint64(1)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := clients.of(a).session.ReadEvents(ctx, connect.NewRequest(&fakv1.ReadEventsRequest{
			SessionId: sessionID, FromSeq: from, Limit: 1000,
		}))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("read from seq %d on %s: %w", from, a.name, err)
		}
		page := resp.Msg.GetEvents()
		events = append(events, page...)
		if len(page) == 0 || page[len(page)-1].GetSeq() >= resp.Msg.GetHeadSeq() {
			if uint64(len(events)) != resp.Msg.GetHeadSeq() {
				return events, fmt.Errorf("%s: read %d events, head %d", a.name, len(events), resp.Msg.GetHeadSeq())
			}
			return events, nil
		}
		from = page[len(page)-1].GetSeq() + 1
	}
}

// verifyJournals checks on every node that the journal is gap-free, holds
// each request id at most once, and has every acknowledged append at its
// acknowledged seq; and that all nodes hold the same journal.
func verifyJournals(t *testing.T, f *fleet, clients *apiClients, sessionID string, initialHead uint64, calls []appendCall) {
	t.Helper()
	bySeq := make(map[uint64]appendCall)
	sent := make(map[string]bool)
	for _, c := range calls {
		sent[c.requestID] = true
		if c.seq == 0 {
			continue
		}
		if c.failure != "" {
			t.Errorf("call %s: %s", c.requestID, c.failure)
		}
		if prev, dup := bySeq[c.seq]; dup {
			t.Errorf("seq %d acknowledged twice: to %s and %s", c.seq, prev.requestID, c.requestID)
		}
		bySeq[c.seq] = c
	}
	var reference []*fakv1.Event
	var refName string
	for _, a := range f.agents {
		events, err := readJournal(clients, a, sessionID)
		if err != nil {
			t.Errorf("journal on %s: %v", a.name, err)
			continue
		}
		seen := make(map[string]uint64)
		lost, unacked, problems := 0, 0, 0
		for i, ev := range events {
			if ev.GetSeq() != uint64(i+1) {
				t.Errorf("%s: event %d has seq %d", a.name, i+1, ev.GetSeq())
				problems++
				break
			}
			rid := ev.GetRequestId()
			if ev.GetSeq() <= initialHead {
				continue
			}
			if prev, dup := seen[rid]; dup {
				t.Errorf("%s: request id %s at seqs %d and %d", a.name, rid, prev, ev.GetSeq())
				problems++
			}
			seen[rid] = ev.GetSeq()
			if !sent[rid] || ev.GetText() != rid {
				t.Errorf("%s: seq %d is an event nobody sent: request id %q text %q", a.name, ev.GetSeq(), rid, ev.GetText())
				problems++
			}
			if _, ok := bySeq[ev.GetSeq()]; !ok {
				unacked++
			}
		}
		for seq, c := range bySeq {
			if seq > uint64(len(events)) {
				lost++
				t.Errorf("%s: acknowledged seq %d (%s through %s) is missing", a.name, seq, c.requestID, c.node)
				continue
			}
			if ev := events[seq-1]; ev.GetRequestId() != c.requestID {
				lost++
				t.Errorf("%s: acknowledged seq %d is %s, but was acknowledged to %s through %s", a.name, seq, ev.GetRequestId(), c.requestID, c.node)
			}
		}
		t.Logf("%s: journal of %d events; %d acknowledged appends, %d lost; %d committed without an ack (failed or timed-out calls); %d other problems",
			a.name, len(events), len(bySeq), lost, unacked, problems)
		if reference == nil {
			reference, refName = events, a.name
			continue
		}
		if len(events) != len(reference) {
			t.Errorf("%s holds %d events, %s %d", a.name, len(events), refName, len(reference))
		}
		for i := range min(len(events), len(reference)) {
			if events[i].GetRequestId() != reference[i].GetRequestId() {
				t.Errorf("%s differs from %s at seq %d", a.name, refName, i+1)
				break
			}
		}
	}
}

// writeMeasureOutput writes the summary to FAK_MEASURE_OUT, if set.
func writeMeasureOutput(t *testing.T, summary any, markdown string) {
	t.Helper()
	path := os.Getenv("FAK_MEASURE_OUT")
	if path == "" {
		return
	}
	js, err := json.MarshalIndent(summary, "", "  ")
	if err != nil {
		t.Errorf("summary: %v", err)
		return
	}
	js = append(js, '\n')
	write := func(p string, data []byte) {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Errorf("write summary: %v", err)
			return
		}
		t.Logf("summary written to %s", p)
	}
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		write(filepath.Join(path, t.Name()+".json"), js)
		write(filepath.Join(path, t.Name()+".md"), []byte(markdown))
		return
	}
	if strings.HasSuffix(path, ".md") {
		write(path, []byte(markdown))
		return
	}
	write(path, js)
}

// ----- sustained load -----------------------------------------------------
