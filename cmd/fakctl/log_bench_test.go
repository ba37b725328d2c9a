package main

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// BenchmarkSessionLog prints a session of FAK_LOG_EVENTS events (1,000,000
// by default; notes of 256 bytes of text) with `fakctl session log`, as a person would,
// through a follower of an in-process three-node fleet, and reports the
// events printed per second (the target: ≥ 300,000 to one client).
// Output goes to a byte counter, so the terminal is not what is measured;
// the CLI's formatting is. -o json is measured beside it.
func BenchmarkSessionLog(b *testing.B) {
	events := 1_000_000
	if v := os.Getenv("FAK_LOG_EVENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			b.Fatalf("FAK_LOG_EVENTS=%q: want a count of at least 1000", v)
		}
		events = n
	}
	isolateEnv(b)
	b.Setenv("FAK_TOKEN", testcluster.Token)
	c := testcluster.New(b, testcluster.Options{})
	leader := c.Leader()
	cl := c.Sessions(leader)
	r, err := cl.CreateSession(context.Background(), connect.NewRequest(&fakv1.CreateSessionRequest{
		Title: "log bench", Placement: &fakv1.Placement{Node: "elsewhere"},
	}))
	if err != nil {
		b.Fatal(err)
	}
	id := r.Msg.Session.SessionId
	// Notes of 256 bytes of words drawn at random, so a page compresses
	// like text, not like one repeated byte.
	words := strings.Fields("the agent read main.go and ran go test ./... which failed in TestMove " +
		"because the destination node had not yet applied the checkpoint; a retry after 20 ms passed " +
		"so the fix is to wait on the change feed instead of polling the replica every few milliseconds")
	rng := rand.New(rand.NewPCG(1, 2))
	batch := make([]*fakv1.EventInput, 1000)
	for i := range batch {
		var text strings.Builder
		for text.Len() < 256 {
			text.WriteString(words[rng.IntN(len(words))])
			text.WriteByte(' ')
		}
		batch[i] = &fakv1.EventInput{Kind: "note", Text: text.String()[:256]}
	}
	for i := 0; i < events/len(batch); i++ {
		if _, err := cl.AppendEvents(context.Background(), connect.NewRequest(&fakv1.AppendEventsRequest{SessionId: id, Events: batch})); err != nil {
			b.Fatal(err)
		}
	}
	addr := c.Followers()[0].APIAddr
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"table", []string{"session", "log", id}},
		{"json", []string{"-o", "json", "session", "log", id}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			var printed int
			start := time.Now()
			for i := 0; i < b.N; i++ {
				out := &lineCounter{}
				code, _, errOut := runCLIContext(context.Background(), addr, out, mode.args...)
				if code != exitOK {
					b.Fatalf("session log: code %d: %s", code, errOut)
				}
				printed += out.lines
			}
			took := time.Since(start)
			b.ReportMetric(float64(printed)/took.Seconds(), "events/s")
			b.ReportMetric(float64(printed/b.N), "events")
		})
	}
}

// lineCounter counts the lines written to it and keeps nothing.
type lineCounter struct{ lines int }

func (l *lineCounter) Write(p []byte) (int, error) {
	for _, c := range p {
		if c == '\n' {
			l.lines++
		}
	}
	return len(p), nil
}

func (l *lineCounter) String() string { return "" }
