package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// session log reads pages ahead of what it prints: across several pages
// every event is printed once, in order, from --from to the head.
func TestSessionLog_PagesInOrder(t *testing.T) {
	fleet := oneNodeFleet(t)
	n1 := fleet.Nodes[0]
	cl := fleet.Sessions(n1)
	ctx := context.Background()
	r, err := cl.CreateSession(ctx, connect.NewRequest(&fakv1.CreateSessionRequest{Title: "pages", Placement: &fakv1.Placement{Node: "elsewhere"}}))
	if err != nil {
		t.Fatal(err)
	}
	id := r.Msg.Session.SessionId
	for call := 0; call < 3; call++ {
		evs := make([]*fakv1.EventInput, 900)
		for i := range evs {
			evs[i] = &fakv1.EventInput{Kind: "note", Text: fmt.Sprintf("note %d", call*900+i)}
		}
		if _, err := cl.AppendEvents(ctx, connect.NewRequest(&fakv1.AppendEventsRequest{SessionId: id, Events: evs})); err != nil {
			t.Fatal(err)
		}
	}
	head := uint64(2 + 3*900) // session.created and epoch.changed first
	for _, from := range []uint64{1, 1001, head} {
		for _, args := range [][]string{{"session", "log", id}, {"-o", "json", "session", "log", id}} {
			code, out, errOut := runCLI(t, n1.APIAddr, append(args, "--from", fmt.Sprint(from))...)
			if code != exitOK {
				t.Fatalf("%v --from %d: code %d: %s", args, from, code, errOut)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if uint64(len(lines)) != head-from+1 {
				t.Fatalf("%v --from %d: %d lines, want %d", args, from, len(lines), head-from+1)
			}
			for i, line := range lines {
				seq := from + uint64(i)
				prefix := fmt.Sprintf("%d  ", seq)
				if args[0] == "-o" {
					prefix = fmt.Sprintf(`{"sessionId":"%s","seq":"%d",`, id, seq)
				}
				if !strings.HasPrefix(line, prefix) {
					t.Fatalf("%v --from %d: line %d is %q, want it to start %q", args, from, i, line, prefix)
				}
			}
		}
	}
}
