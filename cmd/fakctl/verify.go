package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// operator verify-replay: each node rebuilds its state from its own
// snapshot and log and compares it with its live state. The node at --addr
// answers for itself, relays to --node, or asks every Raft peer (--all).

// digestShown is how many hex digits of a digest the table shows.
const digestShown = 12

func operatorVerifyReplayCommand(fs *flag.FlagSet) runFunc {
	node := fs.String("node", "", "`NAME` of the node to check (default: the node at --addr)")
	all := fs.Bool("all", false, "check every server of the Raft configuration, one row each")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after `DURATION` (a rebuild replays the whole log)")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *all && *node != "" {
			return usageErrorf("--node and --all are exclusive")
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		resp, err := c.operatorClient().VerifyReplay(ctx, connect.NewRequest(&fakv1.VerifyReplayRequest{Node: *node, All: *all}))
		if err != nil {
			return err
		}
		checks := resp.Msg.GetNodes()
		slices.SortFunc(checks, func(a, b *fakv1.ReplayCheck) int { return cmp.Compare(a.GetNode(), b.GetNode()) })
		if c.jsonOutput() {
			err = printMessage(c.stdout, resp.Msg)
		} else {
			header, rows := replayTable(checks)
			err = writeTable(c.stdout, header, rows)
		}
		if err != nil {
			return err
		}
		return replayFailure(checks)
	}
}

// replayTable lays out one row per node: the live index, the snapshot the
// first rebuild restored, the entries it replayed, each rebuild's verdict
// and the live digest. DETAIL appears when some row has something to say:
// what differs, why the log-alone rebuild was skipped, or an error.
func replayTable(checks []*fakv1.ReplayCheck) (header []string, rows [][]string) {
	header = []string{"NODE", "INDEX", "SNAPSHOT", "REPLAYED", "SNAPSHOT+LOG", "LOG", "DIGEST"}
	details := make([]string, len(checks))
	for i, ch := range checks {
		if ch.GetError() != "" {
			rows = append(rows, []string{ch.GetNode(), "", "", "", "", "", ""})
			details[i] = "error: " + ch.GetError()
			continue
		}
		snap, replayed, bySnap, byLog := "-", "", "-", "skipped"
		var notes []string
		for _, r := range ch.GetRebuilds() {
			verdict := "equal"
			if !r.GetEqual() {
				verdict = "DIFFERS"
				notes = append(notes, r.GetSource()+": "+describeMismatch(r))
			}
			if r.GetSource() == "log" {
				byLog = verdict
			} else {
				bySnap = verdict
			}
			if replayed == "" {
				replayed = formatUint(r.GetEntries())
				if r.GetSnapshotId() != "" {
					snap = fmt.Sprintf("%s (%d)", r.GetSnapshotId(), r.GetSnapshotIndex())
				}
			}
		}
		if ch.GetLogOnlySkipped() != "" && byLog == "skipped" {
			notes = append(notes, "log alone skipped: "+ch.GetLogOnlySkipped())
		}
		rows = append(rows, []string{
			ch.GetNode(), formatUint(ch.GetLiveIndex()), snap, replayed, bySnap, byLog,
			ch.GetLiveDigest()[:min(digestShown, len(ch.GetLiveDigest()))],
		})
		details[i] = strings.Join(notes, "; ")
	}
	if slices.ContainsFunc(details, func(d string) bool { return d != "" }) {
		header = append(header, "DETAIL")
		for i := range rows {
			rows[i] = append(rows[i], details[i])
		}
	}
	return header, rows
}

// describeMismatch names the buckets that differ (live keys/rebuilt keys)
// and the first key that differs when known.
func describeMismatch(r *fakv1.ReplayRebuild) string {
	var parts []string
	for _, d := range r.GetDifferences() {
		parts = append(parts, fmt.Sprintf("%s (%d/%d keys)", d.GetBucket(), d.GetLiveKeys(), d.GetRebuiltKeys()))
	}
	s := "buckets " + strings.Join(parts, ", ")
	if d := r.GetFirstDifference(); d != nil {
		s += fmt.Sprintf(", first at %s key %q (%s)", d.GetBucket(), d.GetKey(), d.GetKind())
	}
	return s
}

// replayFailure is the error that makes fakctl exit 1 when a node's check
// failed or found a difference; the table already says which and where.
func replayFailure(checks []*fakv1.ReplayCheck) error {
	var bad []string
	for _, ch := range checks {
		switch {
		case ch.GetError() != "":
			bad = append(bad, ch.GetNode()+" could not be checked")
		case !ch.GetEqual():
			bad = append(bad, ch.GetNode()+" differs from its rebuild")
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return errors.New("replay check failed: " + strings.Join(bad, ", "))
}
