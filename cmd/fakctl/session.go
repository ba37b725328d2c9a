package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// appendableKinds are the event kinds clients may append with AppendEvents
// (fsm.AppendableKind), the default first. Input goes through Act, the
// runner's kinds through RunnerService, and fak writes the rest itself
// (including provider boundaries and reset boundaries). fakctl does not
// check --kind itself: the fleet's answer is the authority.
var appendableKinds = []string{"note", "checkpoint", "compaction"}

// defaultAdapter is the runtime adapter session create asks for; it is also
// the server's default (fsm.DefaultRuntimeAdapter).
const defaultAdapter = "echo"

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
	node := fs.String("node", "", "`NAME` of the node whose runner hosts the first epoch (default: the node at --addr)")
	adapter := fs.String("adapter", defaultAdapter, "runtime `ADAPTER` that runs the agent")
	model := fs.String("model", "", "`MODEL` the adapter asks its provider for")
	provider := fs.String("provider", "", "`PROVIDER` of the model")
	accountRef := fs.String("account-ref", "", "`NAME` of the account the compute node resolves to credentials (never a secret)")
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
			Placement: &fakv1.Placement{
				RuntimeAdapter: *adapter,
				Provider:       *provider,
				AccountRef:     *accountRef,
				Model:          *model,
				Node:           *node,
			},
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
		now := timeNow().UnixNano()
		rows := make([][]string, 0, len(sessions))
		for _, s := range sessions {
			rows = append(rows, []string{
				s.GetSessionId(), s.GetTitle(), formatSessionState(s.GetState()),
				formatUint(s.GetEpoch()), s.GetPlacement().GetNode(), leaseHolder(s.GetLease(), now),
				formatUint(s.GetHeadSeq()), formatTime(s.GetCreatedUnixNano()),
			})
		}
		return writeTable(c.stdout, []string{"ID", "TITLE", "STATE", "EPOCH", "NODE", "LEASE", "HEAD", "CREATED"}, rows)
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

func sessionAppendCommand(fs *flag.FlagSet) runFunc {
	kind := fs.String("kind", appendableKinds[0], "event `KIND`: "+strings.Join(appendableKinds, ", "))
	text := fs.String("text", "", "event `TEXT`")
	data := fs.String("data", "", "structured payload, as `JSON`")
	expectedSeq := fs.Uint64("expected-seq", 0, "append only if the journal head is `N` (a new session's head is 2)")
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
