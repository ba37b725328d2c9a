package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

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
	policy := policyFlags(fs)
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
			Policy: policy(),
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

// policyFlags declares the budget policy of a new session's envelope and
// returns a function building it: nil when no flag was given, so the
// node's defaults apply. Zero means "the node's default" (0 there too:
// unlimited).
func policyFlags(fs *flag.FlagSet) func() *fakv1.Policy {
	turns := fs.Uint64("max-turns", 0, "most agent `TURNS` the lineage may run")
	output := fs.Uint64("max-output-tokens", 0, "most model output `TOKENS` the lineage may be charged")
	queries := fs.Uint64("max-queries", 0, "most model `QUERIES` the lineage may make")
	spend := &spendFlag{}
	fs.Var(spend, "max-spend", "most the lineage may spend, a decimal `AMOUNT` of the account's currency (e.g. 12.50)")
	tools := fs.Uint64("max-tool-calls", 0, "most tool `CALLS` the lineage may make")
	input := fs.Uint64("max-input-tokens", 0, "most model input (prompt) `TOKENS` the lineage may be charged")
	contextCap := fs.Uint64("context-cap", 0, "context window cap in `TOKENS` of each session (re-armed by reset, clear and new)")
	priority := fs.String("priority", "", "scheduling `PRIORITY`, carried across boundaries")
	pace := fs.String("pace", "", "`PACE` of the lineage, carried across boundaries")
	qa := fs.String("qa-envelope", "", "QA `ENVELOPE` name, carried across boundaries")
	recoverMode := fs.String("recover", "", "what happens when the compute node dies: `MODE` auto (recovered on an admitted node; the default) or manual (marked stranded, moved by hand)")
	return func() *fakv1.Policy {
		p := &fakv1.Policy{
			Limits: &fakv1.Budget{
				Turns: *turns, OutputTokens: *output, Queries: *queries, SpendMicros: spend.micros, ToolCalls: *tools, InputTokens: *input,
			},
			ContextCap: *contextCap, Priority: *priority, Pace: *pace, QaEnvelope: *qa, Recover: *recoverMode,
		}
		if proto.Equal(p, &fakv1.Policy{Limits: &fakv1.Budget{}}) {
			return nil
		}
		return p
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
				s.GetSessionId(), s.GetTitle(), formatListState(s),
				formatUint(s.GetEpoch()), s.GetPlacement().GetNode(), leaseHolder(s.GetLease(), now),
				formatUint(s.GetHeadSeq()), formatTime(s.GetCreatedUnixNano()),
			})
		}
		return writeTable(c.stdout, []string{"ID", "TITLE", "STATE", "EPOCH", "NODE", "LEASE", "HEAD", "CREATED"}, rows)
	}
}

// formatListState is the STATE column: "active", "stopped", or
// "active STRANDED" for a session waiting for an operator's move off its
// dead compute node.
func formatListState(s *fakv1.Session) string {
	if formatStranded(s) != "" {
		return formatSessionState(s.GetState()) + " STRANDED"
	}
	return formatSessionState(s.GetState())
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
