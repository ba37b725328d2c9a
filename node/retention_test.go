package node_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// The leader's retention pass purges the sessions stopped longer than
// retain_stopped, and only those; each purge is in the audit log every
// node serves and in every node's metrics.
func TestRetentionPurgesSessionsStoppedLongerThanTheRetention(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Configure: func(_ string, cfg *node.Config) { cfg.RetainStopped = time.Hour }})
	leader := c.WaitForLeader(30 * time.Second)
	var ids []string
	for _, title := range []string{"kept running", "done a", "done b"} {
		ids = append(ids, createSession(t, c, leader, title))
	}
	for _, id := range ids[1:] {
		if _, err := c.Sessions(leader).StopSession(ctxT(t, 10*time.Second), connect.NewRequest(&fakv1.StopSessionRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
	}
	if got := leader.Running().RetainNow(time.Now()); got != 0 {
		t.Fatalf("a pass now purged %d sessions stopped moments ago; want 0", got)
	}
	if got := leader.Running().RetainNow(time.Now().Add(2 * time.Hour)); got != 2 {
		t.Fatalf("a pass two hours on purged %d; want the 2 stopped sessions", got)
	}
	describe(t, c, leader, ids[0]) // still there
	for _, n := range c.Nodes {
		c.WaitFor(10*time.Second, n.Name+" serves the audit log of both purges", func() bool {
			resp, err := c.ClusterClient(n).AuditLog(ctxT(t, 10*time.Second), connect.NewRequest(&fakv1.AuditLogRequest{}))
			if err != nil || len(resp.Msg.Entries) != 2 {
				return false
			}
			for i, e := range resp.Msg.Entries {
				if e.Seq != uint64(i+1) || e.Cause != "retention" || e.By != leader.Name || e.SessionId != ids[i+1] && e.SessionId != ids[2-i] {
					t.Fatalf("%s: audit entry %+v", n.Name, e)
				}
			}
			_, mfs := scrape(t, c, n, testcluster.Token)
			v, _ := value(mfs, "fak_sessions_purged_total", map[string]string{"cause": "retention"})
			return v == 2
		})
		_, err := c.Sessions(n).DescribeSession(ctxT(t, 10*time.Second), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: ids[1]}))
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("%s: describe of a purged session: %v, want NotFound", n.Name, err)
		}
	}
}
