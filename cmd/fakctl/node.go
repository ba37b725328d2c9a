package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/client/journal"
)

// The nodes that host execution epochs (NodeService): their records,
// load and draining flag.

// drainPoll is how often node drain reads the fleet while it waits.
var drainPoll = 100 * time.Millisecond

func (c *cli) nodeClient() fakv1connect.NodeServiceClient {
	return fakv1connect.NewNodeServiceClient(c.httpClient, c.baseURL, c.clientOpts...)
}

func listNodes(ctx context.Context, c *cli) ([]*fakv1.Node, error) {
	ctx, cancel := unaryContext(ctx)
	defer cancel()
	resp, err := c.nodeClient().ListNodes(ctx, connect.NewRequest(&fakv1.ListNodesRequest{}))
	if err != nil {
		return nil, err
	}
	nodes := resp.Msg.GetNodes()
	slices.SortFunc(nodes, func(a, b *fakv1.Node) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return nodes, nil
}

func nodeListCommand(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, _ []string) error {
		nodes, err := listNodes(ctx, c)
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, &fakv1.ListNodesResponse{Nodes: nodes})
		}
		if len(nodes) == 0 {
			_, err := fmt.Fprintln(c.stdout, "no node records")
			return err
		}
		rows := make([][]string, 0, len(nodes))
		for _, n := range nodes {
			rows = append(rows, nodeRow(n))
		}
		return writeTable(c.stdout, []string{"NAME", "STATUS", "SESSIONS", "DRAINING", "ADAPTERS", "PROVIDERS", "MODELS", "LABELS", "METERED"}, rows)
	}
}

func nodeRow(n *fakv1.Node) []string {
	return []string{
		n.GetName(), n.GetStatus(), formatLoad(n), yesNo(n.GetDraining()),
		strings.Join(n.GetRuntimeAdapters(), ","), strings.Join(n.GetProviders(), ","), strings.Join(n.GetModels(), ","),
		formatLabels(n.GetLabels()),
		// What meters each provider CLI and model runtime: runtime=gateway
		// (the node's gateway charges every call), =cli (the CLI's own
		// reported cost), =runtime (a model runtime's own count).
		strings.Join(n.GetRuntimeMeters(), ","),
	}
}

// formatLoad renders sessions/capacity: "2/10", "2/unlimited", with the
// sessions moving away: "2/10 (1 moving)".
func formatLoad(n *fakv1.Node) string {
	capacity := "unlimited"
	if c := n.GetCapacity(); c != 0 {
		capacity = formatUint(uint64(c))
	}
	s := formatUint(uint64(n.GetSessions())) + "/" + capacity
	if m := n.GetMoving(); m != 0 {
		s += " (" + formatUint(uint64(m)) + " moving)"
	}
	return s
}

func formatLabels(labels []*fakv1.Label) string {
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = l.GetKey() + "=" + l.GetValue()
	}
	return strings.Join(parts, ",")
}

func setDraining(ctx context.Context, c *cli, node string, draining bool) (*fakv1.Node, error) {
	ctx, cancel := unaryContext(ctx)
	defer cancel()
	resp, err := c.nodeClient().DrainNode(ctx, connect.NewRequest(&fakv1.DrainNodeRequest{Node: node, Draining: draining}))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetNode(), nil
}

func nodeUndrainCommand(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, args []string) error {
		n, err := setDraining(ctx, c, args[0], false)
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, n)
		}
		_, err = fmt.Fprintf(c.stdout, "Node %s is not draining: it admits sessions again (hosts %s)\n", n.GetName(), formatLoad(n))
		return err
	}
}

func nodeDrainCommand(fs *flag.FlagSet) runFunc {
	timeout := fs.Duration("timeout", 10*time.Minute, "stop waiting after `DURATION` (the node stays draining)")
	noWait := fs.Bool("no-wait", false, "mark the node draining and return without waiting for its sessions to move")
	return func(ctx context.Context, c *cli, args []string) error {
		name := args[0]
		start := time.Now()
		n, err := setDraining(ctx, c, name, true)
		if err != nil {
			return err
		}
		if !c.jsonOutput() {
			fmt.Fprintf(c.stdout, "Node %s is draining: no new sessions; %s to move away\n", name, journal.Plural(uint64(n.GetSessions()), "session"))
		}
		if !*noWait {
			if n, err = waitDrained(ctx, c, name, start, *timeout); err != nil {
				return err
			}
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, n)
		}
		return nil
	}
}

// drainTrack is what node drain knows of one session that was on the node.
type drainTrack struct {
	epoch    uint64
	lastMove string // the last failed move reported
	blocked  string // the last refusals reported (no node admits it)
}

// waitDrained polls the fleet until the node hosts no active session,
// printing each session as it leaves (its new node and epoch), each failed
// move (the controller retries those) and each session no node admits,
// with every candidate's failed checks (the leader's DrainStatus), once
// per change.
func waitDrained(ctx context.Context, c *cli, name string, start time.Time, timeout time.Duration) (*fakv1.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tracked := map[string]*drainTrack{}
	moved := 0
	stamp := func() string { return fmt.Sprintf("%6dms", time.Since(start).Milliseconds()) }
	for {
		sessions, err := listAllSessions(ctx, c, fakv1.ReadConsistency_READ_CONSISTENCY_UNSPECIFIED)
		if err != nil && ctx.Err() == nil {
			return nil, err
		}
		byID := map[string]*fakv1.Session{}
		for _, s := range sessions {
			byID[s.GetSessionId()] = s
			if s.GetState() == fakv1.SessionState_SESSION_STATE_ACTIVE && s.GetPlacement().GetNode() == name && tracked[s.GetSessionId()] == nil {
				tracked[s.GetSessionId()] = &drainTrack{epoch: s.GetEpoch()}
			}
		}
		blocked := map[string]string{}
		if st, serr := c.nodeClient().DrainStatus(ctx, connect.NewRequest(&fakv1.DrainStatusRequest{Node: name})); serr == nil {
			for _, b := range st.Msg.GetBlocked() {
				blocked[b.GetSessionId()] = b.GetRefusals()
			}
		}
		ids := make([]string, 0, len(tracked))
		for id := range tracked {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			tr, s := tracked[id], byID[id]
			switch {
			case s == nil && err == nil:
				delete(tracked, id)
			case s == nil:
			case s.GetState() != fakv1.SessionState_SESSION_STATE_ACTIVE:
				c.drainLine(stamp(), "%s stopped (%s)", id, s.GetStopReason())
				delete(tracked, id)
			case s.GetPlacement().GetNode() != name:
				moved++
				c.drainLine(stamp(), "%s moved %s → %s (epoch %d)", id, name, s.GetPlacement().GetNode(), s.GetEpoch())
				delete(tracked, id)
			default:
				if m := s.GetMove(); (m.GetState() == moveFailed || m.GetState() == moveUnsafe) && m.GetMoveId() != tr.lastMove {
					tr.lastMove = m.GetMoveId()
					c.drainLine(stamp(), "%s not moved yet: %s", id, (&moveError{state: m.GetState(), reason: m.GetReason(), phase: m.GetPhase()}).Error())
				}
				if why := blocked[id]; why != "" && why != tr.blocked {
					tr.blocked = why
					c.drainLine(stamp(), "%s waits: no node admits it: %s", id, why)
				}
			}
		}
		nodes, nerr := listNodes(ctx, c)
		if nerr == nil {
			i := slices.IndexFunc(nodes, func(n *fakv1.Node) bool { return n.GetName() == name })
			if i < 0 {
				return nil, fmt.Errorf("node %s has no node record any more", name)
			}
			if n := nodes[i]; n.GetSessions() == 0 && len(tracked) == 0 {
				if !c.jsonOutput() {
					fmt.Fprintf(c.stdout, "Node %s is drained: %s moved in %s; it stays draining until fakctl node undrain %s\n",
						name, journal.Plural(uint64(moved), "session"), time.Since(start).Round(time.Millisecond), name)
				}
				return n, nil
			}
		}
		if !sleepContext(ctx, drainPoll) {
			left := len(tracked)
			if ctx.Err() == context.DeadlineExceeded {
				return nil, fmt.Errorf("node %s still hosts %s after %s; it stays draining (fakctl node list)", name, journal.Plural(uint64(left), "session"), timeout)
			}
			return nil, fmt.Errorf("interrupted with %s left on node %s; it stays draining", journal.Plural(uint64(left), "session"), name)
		}
	}
}

func (c *cli) drainLine(stamp, format string, args ...any) {
	if c.jsonOutput() {
		return
	}
	fmt.Fprintf(c.stdout, "%s  %s\n", stamp, escapeText(fmt.Sprintf(format, args...)))
}
