package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/client/journal"
)

// fakctl fleet: the whole fleet at a glance (ClusterService.Overview), once
// or refreshed in place with --watch.

// maxFleetSessions caps how many sessions one frame fetches, page by page;
// past it the frame says it is truncated.
const maxFleetSessions = 10000

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

type fleetOptions struct {
	stale    bool
	all      bool
	limit    uint
	watch    bool
	interval time.Duration
}

func fleetCommand(fs *flag.FlagSet) runFunc {
	o := &fleetOptions{}
	fs.BoolVar(&o.stale, "stale", false, "read the serving node's replica instead of a linearizable read")
	fs.BoolVar(&o.all, "all", false, "include stopped sessions")
	fs.UintVar(&o.limit, "limit", 0, "sessions per page `N` (default 100, at most 1000); every page is fetched, up to 10000 sessions")
	fs.BoolVar(&o.watch, "watch", false, "refresh until interrupted")
	fs.DurationVar(&o.interval, "interval", 2*time.Second, "time between refreshes with --watch")
	return func(ctx context.Context, c *cli, _ []string) error {
		if o.interval <= 0 {
			return usageErrorf("--interval must be positive")
		}
		if !o.watch {
			ov, err := fetchOverview(ctx, c, o)
			if err != nil {
				return err
			}
			if c.jsonOutput() {
				return printMessage(c.stdout, ov)
			}
			return writeOverview(c.stdout, ov, o)
		}
		return watchFleet(ctx, c, o)
	}
}

// fetchOverview reads every page of the overview (up to maxFleetSessions
// sessions) into one response: the nodes and counts of the first page, the
// sessions of all; next_page_token is set only when truncated.
func fetchOverview(ctx context.Context, c *cli, o *fleetOptions) (*fakv1.OverviewResponse, error) {
	req := &fakv1.OverviewRequest{PageSize: uint32(o.limit), IncludeStopped: o.all}
	if o.stale {
		req.Consistency = fakv1.ReadConsistency_READ_CONSISTENCY_STALE
	}
	var out *fakv1.OverviewResponse
	for {
		cctx, cancel := unaryContext(ctx)
		resp, err := c.clusterClient().Overview(cctx, connect.NewRequest(req))
		cancel()
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = resp.Msg
		} else {
			out.Sessions = append(out.Sessions, resp.Msg.Sessions...)
			out.NextPageToken = resp.Msg.NextPageToken
		}
		if out.NextPageToken == "" || len(out.Sessions) >= maxFleetSessions {
			return out, nil
		}
		req.PageToken = out.NextPageToken
	}
}

// watchFleet redraws the overview every interval until ctx ends. On a
// terminal each frame replaces the last; otherwise frames follow each other
// separated by a blank line (JSON: one response per line). A failed read is
// shown in its frame and the watch goes on.
func watchFleet(ctx context.Context, c *cli, o *fleetOptions) error {
	inPlace := isTerminal(c.stdout)
	for frame := 0; ; frame++ {
		ov, err := fetchOverview(ctx, c, o)
		if ctx.Err() != nil {
			return nil
		}
		var buf bytes.Buffer
		switch {
		case c.jsonOutput() && err != nil:
			fmt.Fprintln(c.stderr, formatError(err))
		case c.jsonOutput():
			if err := printMessageLine(&buf, ov); err != nil {
				return err
			}
		default:
			if inPlace {
				buf.WriteString(clearScreen)
			} else if frame > 0 {
				buf.WriteByte('\n')
			}
			fmt.Fprintf(&buf, "fak fleet via %s at %s, every %s (Ctrl-C stops)\n", c.baseURL,
				time.Now().Format(time.TimeOnly), o.interval)
			if err != nil {
				fmt.Fprintln(&buf, formatError(err))
			} else if err := writeOverview(&buf, ov, o); err != nil {
				return err
			}
		}
		if _, err := c.stdout.Write(buf.Bytes()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.interval):
		}
	}
}

// writeOverview prints the summary line, the NODES table and the SESSIONS
// table.
func writeOverview(w io.Writer, ov *fakv1.OverviewResponse, o *fleetOptions) error {
	fmt.Fprintln(w, fleetSummary(ov, o))
	fmt.Fprintln(w, "\nNODES")
	header, rows := fleetNodeTable(ov.GetNodes())
	if err := writeTable(w, header, rows); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nSESSIONS")
	if len(ov.GetSessions()) == 0 {
		fmt.Fprintln(w, "no sessions")
	} else if err := writeTable(w, []string{"ID", "TITLE", "STATE", "NODE", "EPOCH", "LEASE", "MOVE", "HEAD", "BUDGET"},
		fleetSessionRows(ov.GetSessions())); err != nil {
		return err
	}
	if ov.GetNextPageToken() != "" {
		fmt.Fprintf(w, "(truncated: showing the first %d sessions)\n", len(ov.GetSessions()))
	}
	return nil
}

func fleetSummary(ov *fakv1.OverviewResponse, o *fleetOptions) string {
	alive := 0
	for _, n := range ov.GetNodes() {
		if n.GetGossipStatus() == "alive" {
			alive++
		}
	}
	leader := ov.GetLeader()
	if leader == "" {
		leader = "none"
	}
	read := "linearizable"
	if o.stale {
		read = "stale"
	}
	return fmt.Sprintf("Leader %s; %d nodes (%d alive); sessions: %d active, %d stopped, %d purged; moves open: %d; applied index %d (%s read); state %s",
		leader, len(ov.GetNodes()), alive, ov.GetSessionsActive(), ov.GetSessionsStopped(), ov.GetSessionsPurged(), ov.GetMovesOpen(),
		ov.GetAppliedIndex(), read, journal.FormatBytes(uint64(max(ov.GetStateBytes(), 0))))
}

// fleetNodeTable lays out the nodes; an ERROR column appears when some node
// could not be asked for its status (its APPLIED and LAG are then blank).
func fleetNodeTable(nodes []*fakv1.OverviewNode) (header []string, rows [][]string) {
	header = []string{"NAME", "STATUS", "ROLE", "APPLIED", "LAG", "SESSIONS", "CAPACITY", "DRAINING", "LABELS"}
	withErrors := false
	for _, n := range nodes {
		withErrors = withErrors || n.GetError() != ""
	}
	if withErrors {
		header = append(header, "ERROR")
	}
	for _, n := range nodes {
		applied, lag := formatUint(n.GetAppliedIndex()), formatUint(n.GetAppliedLag())
		if n.GetError() != "" {
			applied, lag = "", ""
		}
		capacity := "unlimited"
		if n.GetCapacity() != 0 {
			capacity = formatUint(uint64(n.GetCapacity()))
		}
		row := []string{
			n.GetName(), n.GetGossipStatus(), n.GetRaftRole(), applied, lag,
			formatUint(uint64(n.GetSessionsHosted())), capacity, yesNo(n.GetDraining()), formatLabels(n.GetLabels()),
		}
		if withErrors {
			row = append(row, n.GetError())
		}
		rows = append(rows, row)
	}
	return header, rows
}

func fleetSessionRows(sessions []*fakv1.OverviewSession) [][]string {
	rows := make([][]string, 0, len(sessions))
	for _, s := range sessions {
		state := formatSessionState(s.GetState())
		if s.GetStranded() {
			state += " (stranded)"
		}
		lease := s.GetLeaseHolderLabel()
		if lease == "" {
			lease = s.GetLeaseHolder()
		}
		rows = append(rows, []string{
			s.GetSessionId(), s.GetTitle(), state, s.GetNode(), formatUint(s.GetEpoch()), lease,
			fleetMove(s.GetOpenMove()), formatUint(s.GetHeadSeq()), fleetBudget(s.GetBudgetRemaining()),
		})
	}
	return rows
}

// fleetMove is an open move in a few words: "CHECKPOINTED n1→n2".
func fleetMove(m *fakv1.Move) string {
	if m == nil {
		return ""
	}
	to := m.GetAdmitted().GetNode()
	if to == "" {
		to = m.GetTarget().GetNode()
	}
	if to == "" {
		to = "?"
	}
	return m.GetState() + " " + m.GetSourceNode() + "→" + to
}

// fleetBudget lists what remains on the limited axes ("turns 7, spend
// 1.5"); no budget means unlimited, nothing left on any axis "exhausted".
func fleetBudget(b *fakv1.Budget) string {
	if b == nil {
		return "unlimited"
	}
	var parts []string
	add := func(name string, v uint64, format func(uint64) string) {
		if v != 0 {
			parts = append(parts, name+" "+format(v))
		}
	}
	add("turns", b.GetTurns(), formatUint)
	add("input", b.GetInputTokens(), formatUint)
	add("tokens", b.GetOutputTokens(), formatUint)
	add("queries", b.GetQueries(), formatUint)
	add("spend", b.GetSpendMicros(), journal.FormatSpend)
	add("tools", b.GetToolCalls(), formatUint)
	if len(parts) == 0 {
		return "exhausted"
	}
	return strings.Join(parts, ", ")
}
