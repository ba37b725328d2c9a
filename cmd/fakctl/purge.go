package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/client/journal"
)

func sessionPurgeCommand(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, args []string) error {
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.sessionClient().PurgeSession(ctx, connect.NewRequest(&fakv1.PurgeSessionRequest{SessionId: args[0]}))
		if err != nil {
			return err
		}
		e := resp.Msg.GetEntry()
		if c.jsonOutput() {
			return printMessage(c.stdout, e)
		}
		_, err = fmt.Fprintf(c.stdout, "Purged %s: %d events, %s of journal (audit #%d)\n",
			args[0], e.GetEvents(), journal.FormatBytes(e.GetBytes()), e.GetSeq())
		return err
	}
}

// auditPageLimit is how many entries one AuditLog call asks for.
const auditPageLimit = 1000

func auditLogCommand(fs *flag.FlagSet) runFunc {
	from := fs.Uint64("from", 1, "first audit `SEQ` to show")
	return func(ctx context.Context, c *cli, args []string) error {
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		var entries []*fakv1.AuditEntry
		next := *from
		for {
			resp, err := c.clusterClient().AuditLog(ctx, connect.NewRequest(&fakv1.AuditLogRequest{FromSeq: next, Limit: auditPageLimit}))
			if err != nil {
				return err
			}
			entries = append(entries, resp.Msg.Entries...)
			if resp.Msg.NextSeq == 0 {
				break
			}
			next = resp.Msg.NextSeq
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, &fakv1.AuditLogResponse{Entries: entries})
		}
		if len(entries) == 0 {
			_, err := fmt.Fprintln(c.stdout, "No audit entries")
			return err
		}
		rows := make([][]string, 0, len(entries))
		for _, e := range entries {
			rows = append(rows, []string{strconv.FormatUint(e.Seq, 10), formatTime(e.TimeUnixNano), e.Kind, e.SessionId,
				e.Title, formatTime(e.StoppedUnixNano), strconv.FormatUint(e.Events, 10), journal.FormatBytes(e.Bytes), e.Cause, e.By})
		}
		return writeTable(c.stdout, []string{"SEQ", "TIME", "KIND", "SESSION", "TITLE", "STOPPED", "EVENTS", "JOURNAL", "CAUSE", "BY"}, rows)
	}
}
