package main

import (
	"context"
	"flag"
	"fmt"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// usage record is the call a gateway makes after each model request
// (LifecycleService.RecordUsage), for operators and tests; launch describe
// shows a guarded launch and the session it charges by default.

func usageRecordCommand(fs *flag.FlagSet) runFunc {
	session := fs.String("session", "", "charge session `ID` (the trace id a gateway sends as X-Trace-Id)")
	launch := fs.String("launch", "", "charge the default session of launch `ID` (what a gateway does without a trace id)")
	turns := fs.Uint64("turns", 0, "agent `TURNS` to charge")
	output := fs.Uint64("output-tokens", 0, "model output `TOKENS` to charge")
	queries := fs.Uint64("queries", 0, "model `QUERIES` to charge")
	spend := &spendFlag{}
	fs.Var(spend, "spend", "`AMOUNT` spent, a decimal of the account's currency (e.g. 0.25)")
	tools := fs.Uint64("tool-calls", 0, "tool `CALLS` to charge")
	input := fs.Uint64("input-tokens", 0, "model input (prompt) `TOKENS` to charge")
	contextTokens := fs.Uint64("context-tokens", 0, "`TOKENS` added to the session's context window")
	requestID := fs.String("request-id", "", "idempotency `KEY`: a retry with the same key charges once")
	return func(ctx context.Context, c *cli, _ []string) error {
		if (*session == "") == (*launch == "") {
			return usageErrorf("exactly one of --session and --launch is required")
		}
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.lifecycleClient().RecordUsage(ctx, connect.NewRequest(&fakv1.RecordUsageRequest{
			SessionId: *session, LaunchId: *launch, ContextTokens: *contextTokens, RequestId: *requestID,
			Usage: &fakv1.Budget{Turns: *turns, OutputTokens: *output, Queries: *queries, SpendMicros: spend.micros, ToolCalls: *tools, InputTokens: *input},
		}))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg)
		}
		fields := [][2]string{{"Charged", resp.Msg.GetSessionId()}}
		if *launch != "" {
			fields[0][1] += " (the default session of launch " + *launch + ")"
		}
		fields = append(fields, [2]string{"Context", formatContext(resp.Msg.GetContextUsed(), resp.Msg.GetContextCap())})
		if err := writeFields(c.stdout, fields); err != nil {
			return err
		}
		if e := resp.Msg.GetEnvelope(); e != nil {
			fmt.Fprintln(c.stdout)
			return writeBudget(c.stdout, e)
		}
		return nil
	}
}

func launchDescribeCommand(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, args []string) error {
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.lifecycleClient().DescribeLaunch(ctx, connect.NewRequest(&fakv1.DescribeLaunchRequest{LaunchId: args[0]}))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg)
		}
		return writeFields(c.stdout, [][2]string{
			{"Launch", resp.Msg.GetLaunchId()},
			{"Provider", resp.Msg.GetProvider()},
			{"Default session", resp.Msg.GetDefaultSession()},
			{"Provider session", resp.Msg.GetProviderSessionId()},
		})
	}
}
