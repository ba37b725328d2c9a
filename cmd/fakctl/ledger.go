package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/client/journal"
)

// The reset ledger (DESIGN.md §5): fresh, reset, clear, new and fork, each
// one RPC answering a Boundary, and the lineage tree they grow.

const ledgerRequestIDUsage = "idempotency `KEY`: a retry with the same key returns the first result and changes nothing"

// ledgerCommand builds the command of one ledger operation: call runs the
// RPC for a session id and request id and returns its boundary.
func ledgerCommand(call func(ctx context.Context, c *cli, id, requestID string, at uint64) (*fakv1.Boundary, error), withAt bool) func(fs *flag.FlagSet) runFunc {
	return func(fs *flag.FlagSet) runFunc {
		requestID := fs.String("request-id", "", ledgerRequestIDUsage)
		var at *uint64
		if withAt {
			at = fs.Uint64("at", 0, "fork at address `SEQ` (default: the head)")
		}
		return func(ctx context.Context, c *cli, args []string) error {
			var atSeq uint64
			if at != nil {
				atSeq = *at
			}
			ctx, cancel := unaryContext(ctx)
			defer cancel()
			b, err := call(ctx, c, args[0], *requestID, atSeq)
			if err != nil {
				return err
			}
			if c.jsonOutput() {
				return printMessage(c.stdout, b)
			}
			return writeFields(c.stdout, boundaryFields(b))
		}
	}
}

var (
	sessionFreshCommand = ledgerCommand(func(ctx context.Context, c *cli, id, rid string, _ uint64) (*fakv1.Boundary, error) {
		return boundaryOf(c.sessionClient().FreshSession(ctx, connect.NewRequest(&fakv1.FreshSessionRequest{SessionId: id, RequestId: rid})))
	}, false)
	sessionResetCommand = ledgerCommand(func(ctx context.Context, c *cli, id, rid string, _ uint64) (*fakv1.Boundary, error) {
		return boundaryOf(c.sessionClient().ResetSession(ctx, connect.NewRequest(&fakv1.ResetSessionRequest{SessionId: id, RequestId: rid})))
	}, false)
	sessionClearCommand = ledgerCommand(func(ctx context.Context, c *cli, id, rid string, _ uint64) (*fakv1.Boundary, error) {
		return boundaryOf(c.sessionClient().ClearSession(ctx, connect.NewRequest(&fakv1.ClearSessionRequest{SessionId: id, RequestId: rid})))
	}, false)
	sessionNewCommand = ledgerCommand(func(ctx context.Context, c *cli, id, rid string, _ uint64) (*fakv1.Boundary, error) {
		return boundaryOf(c.sessionClient().NewSession(ctx, connect.NewRequest(&fakv1.NewSessionRequest{SessionId: id, RequestId: rid})))
	}, false)
	sessionForkCommand = ledgerCommand(func(ctx context.Context, c *cli, id, rid string, at uint64) (*fakv1.Boundary, error) {
		return boundaryOf(c.sessionClient().ForkSession(ctx, connect.NewRequest(&fakv1.ForkSessionRequest{SessionId: id, RequestId: rid, AtSeq: at})))
	}, true)
)

// boundaryOf unwraps the boundary of a ledger response.
func boundaryOf[R any](r *connect.Response[R], err error) (*fakv1.Boundary, error) {
	if err != nil {
		return nil, err
	}
	return any(r.Msg).(interface{ GetBoundary() *fakv1.Boundary }).GetBoundary(), nil
}

// boundaryFields says what a ledger operation did: the action, the
// session in force afterwards (the child for clear, new and fork) and the
// one before it, and the facts of the session in force.
func boundaryFields(b *fakv1.Boundary) [][2]string {
	s := b.GetSession()
	action := b.GetAction()
	if action == "no_op" {
		action = "no_op (a repeat: nothing changed)"
	}
	in := s.GetSessionId()
	switch b.GetAction() {
	case "clear", "new", "fork":
		in += " (the new session, now in force)"
	case "no_op":
	default:
		in += " (same session)"
	}
	fields := [][2]string{
		{"Action", action},
		{"Session", in},
	}
	if p := b.GetPreviousSessionId(); p != "" {
		fields = append(fields, [2]string{"Previous session", p})
	}
	if b.GetAction() == "fresh" {
		fields = append(fields, [2]string{"Pruned", journal.Plural(uint64(b.GetPruned()), "cached provider entry") + " (0 is normal)"})
	}
	state := formatSessionState(s.GetState())
	if s.GetStopReason() != "" {
		state += " (" + s.GetStopReason() + ")"
	}
	fields = append(fields,
		[2]string{"State", state},
		[2]string{"Epoch", formatUint(s.GetEpoch())},
		[2]string{"Head", formatHead(s)},
		[2]string{"Provider session", s.GetProviderSessionId()},
		[2]string{"Lineage", formatLineage(s)},
		[2]string{"Context", formatContext(s.GetContextUsed(), s.GetContextCap())},
	)
	if r := s.GetResetSeq(); r != 0 {
		fields = append(fields, [2]string{"Context reset", formatResetSeq(r)})
	}
	return fields
}

// formatLineage says where a session comes from: "root", "clear of ID",
// "new of ID" or "fork of ID at seq N".
func formatLineage(s *fakv1.Session) string {
	parent := s.GetParentSession()
	if parent == "" {
		return "root (no parent)"
	}
	source := s.GetBoundarySource()
	if source == "" {
		source = "child"
	}
	line := source + " of " + parent
	if a := s.GetForkAddress(); a != 0 {
		line += " at seq " + formatUint(a)
	}
	return line
}

func formatResetSeq(seq uint64) string {
	if seq == 0 {
		return "none"
	}
	return "at seq " + formatUint(seq) + " (the model context starts after it)"
}

func sessionLineageCommand(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, args []string) error {
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.sessionClient().GetLineage(ctx, connect.NewRequest(&fakv1.GetLineageRequest{SessionId: args[0]}))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg)
		}
		return writeLineage(c.stdout, resp.Msg)
	}
}

// writeLineage prints the tree from its root: one row per session, the
// id indented under its parent, children oldest first.
func writeLineage(w io.Writer, l *fakv1.GetLineageResponse) error {
	nodes := make(map[string]*fakv1.LineageNode, len(l.GetNodes()))
	for _, n := range l.GetNodes() {
		nodes[n.GetSession().GetSessionId()] = n
	}
	var rows [][]string
	seen := make(map[string]bool)
	var walk func(id, prefix string, depth int, last bool)
	walk = func(id, prefix string, depth int, last bool) {
		n, ok := nodes[id]
		if !ok || seen[id] {
			return
		}
		seen[id] = true
		label, childPrefix := id, ""
		if depth > 0 {
			branch, cont := "├─ ", "│  "
			if last {
				branch, cont = "└─ ", "   "
			}
			label, childPrefix = prefix+branch+id, prefix+cont
		}
		s := n.GetSession()
		at := ""
		if a := n.GetForkAddress(); a != 0 {
			at = formatUint(a)
		}
		rows = append(rows, []string{
			label, n.GetSource(), at, formatSessionState(s.GetState()), s.GetStopReason(),
			formatUint(s.GetHeadSeq()), s.GetTitle(),
		})
		children := slices.Clone(n.GetChildren())
		slices.SortFunc(children, func(a, b string) int {
			return cmp.Or(cmp.Compare(nodes[a].GetSession().GetCreatedUnixNano(), nodes[b].GetSession().GetCreatedUnixNano()), cmp.Compare(a, b))
		})
		children = slices.DeleteFunc(children, func(id string) bool { return nodes[id] == nil })
		for i, child := range children {
			walk(child, childPrefix, depth+1, i == len(children)-1)
		}
	}
	root := l.GetRoot()
	if root == "" && len(l.GetNodes()) > 0 {
		root = l.GetNodes()[0].GetSession().GetSessionId()
	}
	walk(root, "", 0, true)
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no sessions")
		return err
	}
	return writeTable(w, []string{"SESSION", "SOURCE", "AT", "STATE", "STOP REASON", "HEAD", "TITLE"}, rows)
}
