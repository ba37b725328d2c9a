package node_test

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// BenchmarkRestartNode: a follower of a fleet holding 200,000 events of
// 256 bytes (200 appends of 1,000 events; FAK_RESTART_EVENTS=N makes it N) is shut down cleanly and started
// again, until its replica has applied what the leader had committed when
// it stopped: "kept", continuing from the database its clean shutdown
// kept; "rebuilt", its database removed first, as a crash leaves it
// untrusted (the latest snapshot restored, the log after it replayed).
// "shutdown" is how long the clean shutdown took (its snapshot, if any).
// "crashed": the node's data directory as a process killed at that moment
// leaves it (copied, while the node is idle, from the page cache) replaces
// what its clean shutdown left, so no snapshot was taken at shutdown and
// the database was not marked clean; the same boot, so it is kept.
func BenchmarkRestartNode(b *testing.B) {
	c, leader, cl, id := policyFleet(b, "restart")
	appendThousands(b, cl, id, int(benchEnv(b, "FAK_RESTART_EVENTS", 200_000, 1000)/1000))
	n := c.Followers()[0]
	journal, before := dataDir(b, c, n, "before the first snapshot")
	var kept, rebuilt, crashed, shutdown []time.Duration
	restart := func(discard, crash bool) time.Duration {
		target := leader.Running().Cluster().Status().CommitIndex
		c.WaitFor(30*time.Second, "the follower caught up", func() bool { return n.Running().FSM().AppliedIndex() >= target })
		var crashCopy string
		if crash {
			crashCopy = filepath.Join(b.TempDir(), "crashed")
			copyTree(b, n.DataDir, crashCopy)
		}
		stopping := time.Now()
		c.Stop(n)
		if !discard && !crash {
			shutdown = append(shutdown, time.Since(stopping))
		}
		if crash {
			if err := os.RemoveAll(n.DataDir); err != nil {
				b.Fatal(err)
			}
			if err := os.Rename(crashCopy, n.DataDir); err != nil {
				b.Fatal(err)
			}
		}
		if discard {
			if err := os.Remove(filepath.Join(n.DataDir, "fsm.db")); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		c.Start(n)
		c.WaitFor(60*time.Second, "the restarted follower caught up", func() bool {
			return n.Running().FSM().AppliedIndex() >= target
		})
		return time.Since(start)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The crash first: a clean shutdown before it would have left a
		// fresh snapshot, and a crash finds the log the policy left since
		// the last one.
		crashed = append(crashed, restart(false, true))
		kept = append(kept, restart(false, false))
		rebuilt = append(rebuilt, restart(true, false))
	}
	b.StopTimer()
	reportP50(b, kept, "kept")
	reportP50(b, crashed, "crashed")
	reportP50(b, rebuilt, "rebuilt")
	reportP50(b, shutdown, "shutdown")
	// The leader takes a snapshot (a backup, `fakctl snapshot save`): its
	// data dir with a snapshot and the log compacted behind it.
	if _, err := leader.Running().Cluster().SaveSnapshot(context.Background(), io.Discard); err != nil {
		b.Fatal(err)
	}
	_, after := dataDir(b, c, leader, "the leader, after a snapshot")
	b.ReportMetric(float64(journal)/1e6, "journal-MB")
	b.ReportMetric(float64(before)/float64(journal), "datadir/journal-before")
	b.ReportMetric(float64(after)/float64(journal), "datadir/journal-after")
}

// policyFleet starts a fleet with the agent's snapshot policy (amortised,
// with a snapshot before a shutdown that left much log since the last)
// and creates one session on its leader.
func policyFleet(b *testing.B, title string) (*testcluster.Cluster, *testcluster.Node, fakv1connect.SessionServiceClient, string) {
	c := benchFleet(b, testcluster.Options{Configure: func(_ string, cfg *node.Config) {
		cfg.SnapshotLogFraction = cluster.DefaultSnapshotLogFraction
	}})
	leader := c.Leader()
	cl := c.Sessions(leader)
	r, err := cl.CreateSession(context.Background(), connect.NewRequest(&fakv1.CreateSessionRequest{Title: title}))
	if err != nil {
		b.Fatal(err)
	}
	return c, leader, cl, r.Msg.Session.SessionId
}

// dataDir measures n's data directory and the journals it holds
// (fsm.JournalBytes), once its replica has applied everything committed,
// and logs what each part of the directory holds.
func dataDir(b *testing.B, c *testcluster.Cluster, n *testcluster.Node, when string) (journal, total int64) {
	b.Helper()
	target := c.Leader().Running().Cluster().Status().CommitIndex
	c.WaitFor(30*time.Second, "the follower caught up", func() bool { return n.Running().FSM().AppliedIndex() >= target })
	journal, err := n.Running().FSM().JournalBytes()
	if err != nil {
		b.Fatal(err)
	}
	parts := map[string]int64{}
	err = filepath.WalkDir(n.DataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(n.DataDir, p)
		part, _, _ := strings.Cut(strings.TrimPrefix(rel, "raft/"), "/")
		parts[part] += info.Size()
		total += info.Size()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: data dir %d MB for %d MB of journal: %v", when, total/1e6, journal/1e6, parts)
	return journal, total
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(b *testing.B, src, dst string) {
	b.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		b.Fatal(err)
	}
}

// benchEnv is the count the environment variable name sets for a
// benchmark (at least least), or def when it is unset.
func benchEnv(b *testing.B, name string, def, least int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < least {
		b.Fatalf("%s=%q: want a number of at least %d", name, v, least)
	}
	return n
}

func reportP50(b *testing.B, lat []time.Duration, name string) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, name+"-p50-ms")
}

// BenchmarkSnapshotBytes appends 500,000 events of 256 bytes (500 appends
// of 1,000; FAK_SNAPSHOT_EVENTS=N makes it N) to a fleet and reports, on the leader, the bytes all its
// snapshots wrote against the state's final size: "amortised" with the
// default policy (a snapshot once the log since the last is as large as
// the state it copied), "entries" with Raft's rule (every 64 entries here:
// 64,000 events, as 16,384 entries of 4 events would be).
func BenchmarkSnapshotBytes(b *testing.B) {
	for _, policy := range []struct {
		name     string
		fraction float64
	}{{"amortised", 1}, {"entries", 0}} {
		b.Run(policy.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c := benchFleet(b, testcluster.Options{Configure: func(_ string, cfg *node.Config) {
					cfg.SnapshotThreshold, cfg.SnapshotInterval, cfg.SnapshotLogFraction = 64, 200*time.Millisecond, policy.fraction
				}})
				leader := c.Leader()
				cl := c.Sessions(leader)
				r, err := cl.CreateSession(context.Background(), connect.NewRequest(&fakv1.CreateSessionRequest{Title: "snapshots"}))
				if err != nil {
					b.Fatal(err)
				}
				appendThousands(b, cl, r.Msg.Session.SessionId, int(benchEnv(b, "FAK_SNAPSHOT_EVENTS", 500_000, 1000)/1000))
				time.Sleep(time.Second) // the last policy checks
				state, err := leader.Running().FSM().StateBytes()
				if err != nil {
					b.Fatal(err)
				}
				_, mfs := scrape(b, c, leader, testcluster.Token)
				written, _ := value(mfs, "fak_fsm_snapshot_written_bytes_total", nil)
				count, _ := value(mfs, "fak_fsm_snapshots_total", map[string]string{"outcome": "ok"})
				b.ReportMetric(float64(state)/1e6, "state-MB")
				b.ReportMetric(written/1e6, "written-MB")
				b.ReportMetric(written/float64(state), "written/state")
				b.ReportMetric(count, "snapshots")
				c.StopAll()
			}
		})
	}
}

// appendThousands appends calls appends of 1,000 notes of 256 bytes.
func appendThousands(b *testing.B, cl fakv1connect.SessionServiceClient, id string, calls int) {
	evs := make([]*fakv1.EventInput, 1000)
	for i := range evs {
		evs[i] = &fakv1.EventInput{Kind: "note", Text: strings.Repeat("x", 256)}
	}
	for i := 0; i < calls; i++ {
		if _, err := cl.AppendEvents(context.Background(), connect.NewRequest(&fakv1.AppendEventsRequest{SessionId: id, Events: evs})); err != nil {
			b.Fatal(err)
		}
	}
}
