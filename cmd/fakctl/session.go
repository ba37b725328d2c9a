package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// listPageSize is the largest page ListSessions allows; bigger pages mean
// fewer round trips.
const listPageSize = 1000

func readConsistency(stale bool) fakv1.ReadConsistency {
	if stale {
		return fakv1.ReadConsistency_READ_CONSISTENCY_STALE
	}
	return fakv1.ReadConsistency_READ_CONSISTENCY_UNSPECIFIED
}

const staleUsage = "read the serving node's replica without contacting the leader (may lag)"

func sessionCreateCommand(fs *flag.FlagSet) runFunc {
	title := fs.String("title", "", "session `TITLE` (required)")
	objective := fs.String("objective", "", "what the session is for")
	requestID := fs.String("request-id", "", "idempotency `KEY`: a retry with the same key returns the same session")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *title == "" {
			return usageErrorf("--title is required")
		}
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.sessionClient().CreateSession(ctx, connect.NewRequest(&fakv1.CreateSessionRequest{
			Title:     *title,
			Objective: *objective,
			RequestId: *requestID,
		}))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg.GetSession())
		}
		_, err = fmt.Fprintln(c.stdout, resp.Msg.GetSession().GetSessionId())
		return err
	}
}

func sessionListCommand(fs *flag.FlagSet) runFunc {
	stale := fs.Bool("stale", false, staleUsage)
	return func(ctx context.Context, c *cli, _ []string) error {
		sessions, err := listAllSessions(ctx, c, readConsistency(*stale))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessageList(c.stdout, sessions)
		}
		rows := make([][]string, 0, len(sessions))
		for _, s := range sessions {
			rows = append(rows, []string{
				s.GetSessionId(), s.GetTitle(), formatSessionState(s.GetState()),
				formatUint(s.GetHeadSeq()), formatTime(s.GetCreatedUnixNano()),
			})
		}
		return writeTable(c.stdout, []string{"ID", "TITLE", "STATE", "HEAD", "CREATED"}, rows)
	}
}

// listAllSessions follows next_page_token until the last page.
func listAllSessions(ctx context.Context, c *cli, consistency fakv1.ReadConsistency) ([]*fakv1.Session, error) {
	client := c.sessionClient()
	var sessions []*fakv1.Session
	pageToken := ""
	for {
		callCtx, cancel := unaryContext(ctx)
		resp, err := client.ListSessions(callCtx, connect.NewRequest(&fakv1.ListSessionsRequest{
			Consistency: consistency,
			PageSize:    listPageSize,
			PageToken:   pageToken,
		}))
		cancel()
		if err != nil {
			return nil, err
		}
		sessions = append(sessions, resp.Msg.GetSessions()...)
		next := resp.Msg.GetNextPageToken()
		if next == "" || next == pageToken {
			return sessions, nil
		}
		pageToken = next
	}
}

func sessionDescribeCommand(fs *flag.FlagSet) runFunc {
	stale := fs.Bool("stale", false, staleUsage)
	return func(ctx context.Context, c *cli, args []string) error {
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.sessionClient().DescribeSession(ctx, connect.NewRequest(&fakv1.DescribeSessionRequest{
			SessionId:   args[0],
			Consistency: readConsistency(*stale),
		}))
		if err != nil {
			return err
		}
		session := resp.Msg.GetSession()
		if c.jsonOutput() {
			return printMessage(c.stdout, session)
		}
		return writeFields(c.stdout, sessionFields(session))
	}
}

func sessionFields(s *fakv1.Session) [][2]string {
	fields := [][2]string{
		{"ID", s.GetSessionId()},
		{"Title", s.GetTitle()},
		{"Objective", s.GetObjective()},
		{"State", formatSessionState(s.GetState())},
	}
	if s.GetStopReason() != "" {
		fields = append(fields, [2]string{"Stop reason", s.GetStopReason()})
	}
	return append(fields,
		[2]string{"Head", formatUint(s.GetHeadSeq())},
		[2]string{"Created", formatTime(s.GetCreatedUnixNano())},
		[2]string{"Updated", formatTime(s.GetUpdatedUnixNano())},
	)
}

func sessionAppendCommand(fs *flag.FlagSet) runFunc {
	kind := fs.String("kind", "input", "event `KIND`, e.g. input, output, tool.call")
	text := fs.String("text", "", "event `TEXT`")
	data := fs.String("data", "", "structured payload, as `JSON`")
	expectedSeq := fs.Uint64("expected-seq", 0, "append only if the journal head is `N` (0: the journal is empty)")
	requestID := fs.String("request-id", "", "idempotency `KEY`: a retry with the same key appends once")
	return func(ctx context.Context, c *cli, args []string) error {
		if *text == "" && *data == "" {
			return usageErrorf("--text or --data is required")
		}
		if *data != "" && !json.Valid([]byte(*data)) {
			return usageErrorf("--data is not valid JSON")
		}
		req := &fakv1.AppendEventsRequest{
			SessionId: args[0],
			Events:    []*fakv1.EventInput{{Kind: *kind, Text: *text, Data: []byte(*data)}},
			RequestId: *requestID,
		}
		// expected_seq is optional in the API: absent means "append anywhere",
		// which differs from 0, "append only to an empty journal".
		if flagWasSet(fs, "expected-seq") {
			req.ExpectedSeq = expectedSeq
		}
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.sessionClient().AppendEvents(ctx, connect.NewRequest(req))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg)
		}
		first, last := resp.Msg.GetFirstSeq(), resp.Msg.GetLastSeq()
		if first == last {
			_, err = fmt.Fprintf(c.stdout, "Appended %s seq %d\n", args[0], first)
		} else {
			_, err = fmt.Fprintf(c.stdout, "Appended %s seqs %d-%d\n", args[0], first, last)
		}
		return err
	}
}

func sessionStopCommand(fs *flag.FlagSet) runFunc {
	reason := fs.String("reason", "", "why the session is stopped")
	return func(ctx context.Context, c *cli, args []string) error {
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.sessionClient().StopSession(ctx, connect.NewRequest(&fakv1.StopSessionRequest{
			SessionId: args[0],
			Reason:    *reason,
		}))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg.GetSession())
		}
		_, err = fmt.Fprintf(c.stdout, "Stopped %s\n", args[0])
		return err
	}
}
