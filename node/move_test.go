package node_test

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// Moves on real three-node fleets (DESIGN.md §8). Every test ends with the
// invariant checker over every journal on every replica.

func moveFleet(t *testing.T, opts testcluster.Options) *testcluster.Cluster {
	t.Helper()
	if opts.EchoTurn == 0 {
		opts.EchoTurn = 50 * time.Millisecond
	}
	// Tests take leases and attach without renewing them.
	opts.LeaseTTL, opts.AttachmentTTL = 5*time.Minute, 5*time.Minute
	c := testcluster.New(t, opts)
	waitNodeRecords(t, c)
	return c
}

// waitNodeRecords waits until every node's record is committed and alive.
func waitNodeRecords(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	want := 0
	for _, n := range c.Nodes {
		if n.Running() != nil {
			want++
		}
	}
	c.WaitFor(30*time.Second, "a node record per node, alive", func() bool {
		l := c.Leader()
		if l == nil {
			return false
		}
		resp, err := c.NodeClient(l).ListNodes(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.ListNodesRequest{}))
		if err != nil {
			return false
		}
		alive := 0
		for _, n := range resp.Msg.Nodes {
			if n.Status == "alive" && len(n.RuntimeAdapters) > 0 {
				alive++
			}
		}
		return alive == want
	})
}

func moveSession(t *testing.T, c *testcluster.Cluster, via *testcluster.Node, id, to string, safePoint time.Duration) *fakv1.Move {
	t.Helper()
	resp, err := c.Sessions(via).MoveSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.MoveSessionRequest{
		SessionId: id, ToNode: to, SafePointTimeoutMs: safePoint.Milliseconds(),
	}))
	if err != nil {
		t.Fatalf("move %s to %s through %s: %v", id, to, via.Name, err)
	}
	return resp.Msg.Move
}

// getMove reads the session's move through any running node (nil while no
// node answers).
func getMove(t *testing.T, c *testcluster.Cluster, id string) *fakv1.Move {
	for _, n := range c.Nodes {
		if n.Running() == nil {
			continue
		}
		resp, err := c.Sessions(n).GetMove(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.GetMoveRequest{SessionId: id}))
		if err == nil {
			return resp.Msg.Move
		}
	}
	return nil
}

// waitMove waits until the move moveID of the session is in a state cond
// accepts, and returns it.
func waitMove(t *testing.T, c *testcluster.Cluster, id, moveID, what string, cond func(*fakv1.Move) bool) *fakv1.Move {
	t.Helper()
	var m *fakv1.Move
	c.WaitFor(60*time.Second, "move "+moveID+": "+what, func() bool {
		m = getMove(t, c, id)
		return m != nil && m.MoveId == moveID && cond(m)
	})
	return m
}

func inState(states ...string) func(*fakv1.Move) bool {
	return func(m *fakv1.Move) bool {
		for _, s := range states {
			if m.State == s {
				return true
			}
		}
		return false
	}
}

var moveEnded = inState(fsm.MoveCutoverCommitted, fsm.MoveFailed, fsm.MoveUnsafe)

// talk: a terminal client attached through via, holding the lease.
func talk(t *testing.T, c *testcluster.Cluster, via *testcluster.Node, id string) string {
	t.Helper()
	att := attach(t, c, via, id, "terminal", "term")
	if err := takeLease(ctxT(t, 15*time.Second), c, via, id, att, false); err != nil {
		t.Fatal(err)
	}
	return att
}

func actAt(t *testing.T, c *testcluster.Cluster, via *testcluster.Node, id, att string, epoch uint64, text string) uint64 {
	t.Helper()
	seq, err := act(ctxT(t, 15*time.Second), c, via, id, att, epoch, text)
	if err != nil {
		t.Fatalf("act %q (epoch %d) through %s: %v", text, epoch, via.Name, err)
	}
	return seq
}

// turnNode is the node named by the turn.started of the input at seq.
func turnNode(t *testing.T, evs []*fakv1.Event, input uint64) string {
	t.Helper()
	tr := turnOf(t, evs, input)
	if tr == nil {
		t.Fatalf("no complete turn for input #%d", input)
	}
	n, _ := fact(t, tr[0])["node"].(string)
	return n
}

// pendingApproval waits for the approval request of the tool turn of
// input seq and returns its address.
func pendingApproval(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, id string, input uint64) uint64 {
	t.Helper()
	evs := waitJournal(t, c, n, id, "the approval request", func(evs []*fakv1.Event) bool {
		return count(after(evs, input), "approval.requested") == 1
	})
	for _, ev := range after(evs, input) {
		if ev.Kind == "approval.requested" {
			return ev.Seq
		}
	}
	return 0
}

func approve(t *testing.T, c *testcluster.Cluster, via *testcluster.Node, id, att string, seq uint64) {
	t.Helper()
	_, err := c.Sessions(via).AnswerApproval(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.AnswerApprovalRequest{
		SessionId: id, AttachmentId: att, ApprovalSeq: seq, Approved: true,
	}))
	if err != nil {
		t.Fatalf("approve #%d through %s: %v", seq, via.Name, err)
	}
}

// An idle session moves to another node; the client attached before the
// move keeps talking to it without reattaching: its watch follows the
// journal across the cutover, and Act works with the epoch describe now
// reports; the turn runs on the destination.
func TestCluster_MoveIdleSessionAndKeepTalking(t *testing.T) {
	c := moveFleet(t, testcluster.Options{})
	fs := c.Followers()
	src, dst, via := fs[0], fs[1], c.Leader()
	id := createSession(t, c, src, "idle move")
	att := talk(t, c, via, id)
	w := watch(t, c, via, id, att, 0)
	hello := actAt(t, c, via, id, att, 1, "hello")
	w.waitFor(t, "the turn before the move", turnDone(t, hello))

	mv := moveSession(t, c, via, id, dst.Name, 0)
	m := waitMove(t, c, id, mv.MoveId, "an end", moveEnded)
	if m.State != fsm.MoveCutoverCommitted || m.Admitted.GetNode() != dst.Name || m.NewEpoch != 2 || m.Cause != fsm.MoveCauseOperator {
		t.Fatalf("move ended %s (%s) on %s as epoch %d, want CUTOVER_COMMITTED on %s as epoch 2", m.State, m.Reason, m.Admitted.GetNode(), m.NewEpoch, dst.Name)
	}
	d := describe(t, c, via, id)
	if d.Epoch != 2 || d.Placement.GetNode() != dst.Name || d.MovesCompleted != 1 {
		t.Fatalf("after the move: epoch %d on %s (%d moves), want epoch 2 on %s", d.Epoch, d.Placement.GetNode(), d.MovesCompleted, dst.Name)
	}
	if _, err := act(ctxT(t, 15*time.Second), c, via, id, att, 1, "old epoch"); reasonOf(err) != string(fsm.ReasonStaleEpoch) {
		t.Fatalf("act with the old epoch: %v, want STALE_EPOCH", err)
	}
	again := actAt(t, c, via, id, att, d.Epoch, "after the move")
	evs := w.waitFor(t, "the turn after the move", turnDone(t, again))
	if n := turnNode(t, evs, again); n != dst.Name {
		t.Fatalf("the turn after the move ran on %s, want %s", n, dst.Name)
	}
	if got := transcript(turnOf(t, evs, again)); !strings.Contains(got, "output:echo: after the move") {
		t.Fatalf("turn after the move:\n%s", got)
	}
	stamps := map[string]int64{}
	for _, k := range []string{"move.requested", "move.checkpointed", "move.admitted", "move.restored", "move.cutover"} {
		if count(evs, k) != 1 {
			t.Fatalf("the watch saw %d %s events, want 1:\n%s", count(evs, k), k, transcript(evs))
		}
		for _, ev := range evs {
			if ev.Kind == k {
				stamps[k] = ev.TimeUnixNano
			}
		}
	}
	// The cutover is proposed behind the restore, in its entry, with its
	// stamp (cluster companions): not one commit round after it.
	if stamps["move.cutover"] != stamps["move.restored"] {
		t.Fatalf("move.restored stamped %d, move.cutover %d: want one entry, one stamp", stamps["move.restored"], stamps["move.cutover"])
	}
	// The controller counts the cutover it did not propose itself, once.
	_, mfs := scrape(t, c, c.Leader(), testcluster.Token)
	if v, _ := value(mfs, "fak_moves_total", map[string]string{"cause": "operator", "outcome": "committed"}); v != 1 {
		t.Fatalf("leader fak_moves_total{operator,committed} = %v, want 1", v)
	}
	checkMoveInvariants(t, c)
}

// A move requested during a turn waits for the safe point: the checkpoint
// follows the turn's completion, and input sent during the move is served
// once, by the destination, after cutover.
func TestCluster_MoveWaitsForTheSafePoint(t *testing.T) {
	c := moveFleet(t, testcluster.Options{})
	fs := c.Followers()
	src, dst, via := fs[0], fs[1], c.Leader()
	id := createSession(t, c, src, "long turn")
	att := talk(t, c, via, id)
	tool := actAt(t, c, via, id, att, 1, "!tool ls")
	ask := pendingApproval(t, c, via, id, tool)

	mv := moveSession(t, c, via, id, dst.Name, 0)
	if mv.State != fsm.MoveSafePointRequested {
		t.Fatalf("move opened in %s", mv.State)
	}
	during := actAt(t, c, via, id, att, 1, "sent during the move")
	if m := getMove(t, c, id); m.State != fsm.MoveSafePointRequested {
		t.Fatalf("with a turn in flight the move is %s, want %s", m.State, fsm.MoveSafePointRequested)
	}
	approve(t, c, via, id, att, ask)
	m := waitMove(t, c, id, mv.MoveId, "an end", moveEnded)
	if m.State != fsm.MoveCutoverCommitted {
		t.Fatalf("move ended %s: %s", m.State, m.Reason)
	}
	evs := waitJournal(t, c, via, id, "the input sent during the move answered", turnDone(t, during))
	tr := turnOf(t, evs, tool)
	if done := tr[len(tr)-1].Seq; m.CheckpointSeq < done {
		t.Fatalf("checkpoint at #%d, before the turn in flight completed at #%d", m.CheckpointSeq, done)
	}
	if n := turnNode(t, evs, tool); n != src.Name {
		t.Fatalf("the tool turn ran on %s, want the source %s", n, src.Name)
	}
	if n := turnNode(t, evs, during); n != dst.Name {
		t.Fatalf("the input sent during the move ran on %s, want the destination %s", n, dst.Name)
	}
	checkMoveInvariants(t, c)
}

// With a turn in flight past the safe-point timeout the move is
// MOVE_UNSAFE and the source keeps the session: it finishes the turn and
// serves the next input in the same epoch.
func TestCluster_MoveUnsafeLeavesTheSourceRunning(t *testing.T) {
	c := moveFleet(t, testcluster.Options{})
	fs := c.Followers()
	src, dst, via := fs[0], fs[1], c.Leader()
	id := createSession(t, c, src, "unsafe")
	att := talk(t, c, via, id)
	tool := actAt(t, c, via, id, att, 1, "!tool ls")
	ask := pendingApproval(t, c, via, id, tool)

	mv := moveSession(t, c, via, id, dst.Name, 200*time.Millisecond)
	m := waitMove(t, c, id, mv.MoveId, "an end", moveEnded)
	if m.State != fsm.MoveUnsafe || m.Phase != fsm.MoveSafePointRequested || !strings.Contains(m.Reason, "no safe point") {
		t.Fatalf("move ended %s in %s (%q), want MOVE_UNSAFE in %s", m.State, m.Phase, m.Reason, fsm.MoveSafePointRequested)
	}
	approve(t, c, via, id, att, ask)
	next := actAt(t, c, via, id, att, 1, "still here")
	evs := waitJournal(t, c, via, id, "the next turn", turnDone(t, next))
	if a, b := turnNode(t, evs, tool), turnNode(t, evs, next); a != src.Name || b != src.Name {
		t.Fatalf("turns ran on %s and %s, want both on the source %s", a, b, src.Name)
	}
	if d := describe(t, c, via, id); d.Epoch != 1 || d.Placement.GetNode() != src.Name {
		t.Fatalf("after MOVE_UNSAFE: epoch %d on %s, want epoch 1 on %s", d.Epoch, d.Placement.GetNode(), src.Name)
	}
	checkMoveInvariants(t, c)
}

// The destination dies mid-move: MOVE_FAILED (refused at admission, or no
// restore from a node gossip declares dead), and the source stays
// authoritative and serves the session.
func TestCluster_MoveFailsWhenTheDestinationDies(t *testing.T) {
	c := moveFleet(t, testcluster.Options{})
	fs := c.Followers()
	src, dst, via := fs[0], fs[1], c.Leader()
	id := createSession(t, c, src, "dead destination")
	att := talk(t, c, via, id)
	tool := actAt(t, c, via, id, att, 1, "!tool ls")
	ask := pendingApproval(t, c, via, id, tool)
	mv := moveSession(t, c, via, id, dst.Name, 0)
	c.Stop(dst)
	approve(t, c, via, id, att, ask)
	m := waitMove(t, c, id, mv.MoveId, "an end", moveEnded)
	if m.State != fsm.MoveFailed || !strings.Contains(m.Reason, dst.Name) {
		t.Fatalf("move ended %s in %s (%q), want MOVE_FAILED naming %s", m.State, m.Phase, m.Reason, dst.Name)
	}
	t.Logf("move failed in %s: %s", m.Phase, m.Reason)
	next := actAt(t, c, via, id, att, 1, "source still in charge")
	evs := waitJournal(t, c, via, id, "the next turn", turnDone(t, next))
	if n := turnNode(t, evs, next); n != src.Name {
		t.Fatalf("the turn after the failed move ran on %s, want %s", n, src.Name)
	}
	checkMoveInvariants(t, c)
}

// The leader (and so the controller) dies mid-move: the next leader's
// controller ends the move from FSM state, and the session never has two
// current epochs.
func TestCluster_MoveSurvivesLeaderLoss(t *testing.T) {
	c := moveFleet(t, testcluster.Options{})
	leader := c.Leader()
	fs := c.Followers()
	src, dst := fs[0], fs[1]
	id := createSession(t, c, src, "leader loss")
	att := talk(t, c, src, id)
	tool := actAt(t, c, src, id, att, 1, "!tool ls")
	ask := pendingApproval(t, c, src, id, tool)
	mv := moveSession(t, c, src, id, dst.Name, 0)
	c.Stop(leader)
	c.WaitForLeader(30 * time.Second)
	approve(t, c, src, id, att, ask)
	m := waitMove(t, c, id, mv.MoveId, "an end", moveEnded)
	t.Logf("move ended %s under the new leader %s (%s)", m.State, c.Leader().Name, m.Reason)
	d := describe(t, c, src, id)
	want, epoch := src.Name, uint64(1)
	if m.State == fsm.MoveCutoverCommitted {
		want, epoch = dst.Name, 2
	}
	if d.Epoch != epoch || d.Placement.GetNode() != want {
		t.Fatalf("after %s: epoch %d on %s, want epoch %d on %s", m.State, d.Epoch, d.Placement.GetNode(), epoch, want)
	}
	next := actAt(t, c, src, id, att, d.Epoch, "after the leader change")
	evs := waitJournal(t, c, src, id, "the next turn", turnDone(t, next))
	if n := turnNode(t, evs, next); n != want {
		t.Fatalf("the next turn ran on %s, want %s", n, want)
	}
	checkMoveInvariants(t, c)
}

// After cutover the old source can no longer write: a runner write of its
// epoch (what a paused or partitioned source would send late) is refused
// with STALE_EPOCH, through any node.
func TestCluster_MoveFencesTheOldSource(t *testing.T) {
	c := moveFleet(t, testcluster.Options{})
	fs := c.Followers()
	src, dst, via := fs[0], fs[1], c.Leader()
	id := createSession(t, c, src, "fencing")
	mv := moveSession(t, c, via, id, dst.Name, 0)
	if m := waitMove(t, c, id, mv.MoveId, "an end", moveEnded); m.State != fsm.MoveCutoverCommitted {
		t.Fatalf("move ended %s: %s", m.State, m.Reason)
	}
	head := describe(t, c, via, id).HeadSeq
	for _, n := range []*testcluster.Node{src, dst, via} {
		_, err := c.RunnerClient(n).AppendRunnerEvents(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.AppendRunnerEventsRequest{
			SessionId: id, Epoch: mv.SourceEpoch, Events: []*fakv1.EventInput{{Kind: "output", Text: "late write from the old source"}},
		}))
		if reasonOf(err) != string(fsm.ReasonStaleEpoch) {
			t.Fatalf("old-epoch runner write through %s: %v, want STALE_EPOCH", n.Name, err)
		}
	}
	if h := describe(t, c, via, id).HeadSeq; h != head {
		t.Fatalf("head moved from #%d to #%d: a stale write landed", head, h)
	}
	checkMoveInvariants(t, c)
}

// A node dead in gossip for longer than --recover-after has its sessions
// recovered on the others: each moved (cause recovery) from its last
// committed address; a turn it left in flight is closed as interrupted by
// the new runner, and every session keeps serving input.
func TestCluster_RecoversTheSessionsOfADeadNode(t *testing.T) {
	c := moveFleet(t, testcluster.Options{RecoverAfter: 500 * time.Millisecond})
	fs := c.Followers()
	lost, other, via := fs[0], fs[1], c.Leader()
	var ids, atts []string
	for i := 0; i < 3; i++ {
		id := createSession(t, c, lost, "on the lost node")
		ids, atts = append(ids, id), append(atts, talk(t, c, via, id))
	}
	bystander := createSession(t, c, other, "elsewhere")
	// One session has a turn in flight when its node dies.
	tool := actAt(t, c, via, ids[0], atts[0], 1, "!tool ls")
	pendingApproval(t, c, via, ids[0], tool)
	done := actAt(t, c, via, ids[1], atts[1], 1, "before")
	waitJournal(t, c, via, ids[1], "a turn before the loss", turnDone(t, done))

	c.Stop(lost)
	for i, id := range ids {
		var m *fakv1.Move
		c.WaitFor(60*time.Second, "session "+id+" recovered", func() bool {
			m = getMove(t, c, id)
			return m != nil && m.Cause == fsm.MoveCauseRecovery && m.State == fsm.MoveCutoverCommitted
		})
		d := describe(t, c, via, id)
		if d.Placement.GetNode() == lost.Name || d.Epoch != 2 {
			t.Fatalf("session %s: epoch %d on %s after recovery", id, d.Epoch, d.Placement.GetNode())
		}
		next := actAt(t, c, via, id, atts[i], d.Epoch, "after recovery")
		evs := waitJournal(t, c, via, id, "a turn after recovery", turnDone(t, next))
		if n := turnNode(t, evs, next); n != d.Placement.GetNode() {
			t.Fatalf("session %s: the turn after recovery ran on %s, want %s", id, n, d.Placement.GetNode())
		}
		if i == 0 {
			tr := turnOf(t, evs, tool)
			if last := tr[len(tr)-1]; last.Text != "interrupted" {
				t.Fatalf("the turn in flight on the lost node ended %q, want interrupted", last.Text)
			}
		}
	}
	if m := getMove(t, c, bystander); m != nil {
		t.Fatalf("a session of a live node was moved: %v", m)
	}
	checkMoveInvariants(t, c)
}

// Draining a node moves its sessions away one at a time (cause drain);
// the node admits nothing while draining, and takes sessions again once
// undrained.
func TestCluster_DrainMovesSessionsAwayOneAtATime(t *testing.T) {
	c := moveFleet(t, testcluster.Options{})
	fs := c.Followers()
	drained, via := fs[0], c.Leader()
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, createSession(t, c, drained, "to drain"))
	}
	if _, err := c.NodeClient(via).DrainNode(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.DrainNodeRequest{
		Node: drained.Name, Draining: true,
	})); err != nil {
		t.Fatal(err)
	}
	type span struct{ from, to int64 }
	var spans []span
	for _, id := range ids {
		var m *fakv1.Move
		c.WaitFor(60*time.Second, "session "+id+" drained", func() bool {
			m = getMove(t, c, id)
			return m != nil && m.Cause == fsm.MoveCauseDrain && m.State == fsm.MoveCutoverCommitted
		})
		if m.Admitted.GetNode() == drained.Name {
			t.Fatalf("session %s drained onto the draining node", id)
		}
		spans = append(spans, span{m.RequestedUnixNano, m.StateUnixNano})
	}
	for i := range spans {
		for j := range spans {
			if i != j && spans[i].from < spans[j].from && spans[j].from < spans[i].to {
				t.Fatalf("drain moves overlap: %v and %v", spans[i], spans[j])
			}
		}
	}
	// A draining node admits nothing: a create or a move naming it is
	// refused at once, with the admission's check.
	if _, err := c.Sessions(via).CreateSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.CreateSessionRequest{
		Title: "onto a draining node", Placement: &fakv1.Placement{Node: drained.Name},
	})); apiclient.ErrorInfo(err).GetReason() != string(fsm.ReasonNotAdmitted) || !strings.Contains(err.Error(), "not_draining") {
		t.Fatalf("create on the draining node: %v, want NOT_ADMITTED naming not_draining", err)
	}
	id := createSession(t, c, via, "not onto a draining node")
	if _, err := c.Sessions(via).MoveSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.MoveSessionRequest{
		SessionId: id, ToNode: drained.Name,
	})); apiclient.ErrorInfo(err).GetReason() != string(fsm.ReasonNotAdmitted) || !strings.Contains(err.Error(), "not_draining") {
		t.Fatalf("move onto the draining node: %v, want NOT_ADMITTED naming not_draining", err)
	}
	if _, err := c.NodeClient(via).DrainNode(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.DrainNodeRequest{
		Node: drained.Name, Draining: false,
	})); err != nil {
		t.Fatal(err)
	}
	mv := moveSession(t, c, via, id, drained.Name, 0)
	if m := waitMove(t, c, id, mv.MoveId, "an end", moveEnded); m.State != fsm.MoveCutoverCommitted {
		t.Fatalf("move onto the undrained node ended %s: %s", m.State, m.Reason)
	}
	checkMoveInvariants(t, c)
}

// Each node's capabilities (flags) reach its node record through gossip;
// admission checks them and a refusal names the failed check; a model
// change is disclosed as degradation and needs acceptance.
func TestCluster_NodeRecordsDriveAdmission(t *testing.T) {
	c := moveFleet(t, testcluster.Options{Configure: func(name string, cfg *node.Config) {
		if name == "n2" {
			cfg.Labels = map[string]string{"zone": "b", "gpu": "yes"}
			cfg.Models = []string{"m-big", "m-big"}
			cfg.AccountRefs = []string{"team-a"}
			cfg.Capacity = 1
		}
	}})
	n1, n2, n3 := c.Node("n1"), c.Node("n2"), c.Node("n3")
	resp, err := c.NodeClient(n1).ListNodes(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.ListNodesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var rec *fakv1.Node
	for _, n := range resp.Msg.Nodes {
		if n.Name == n2.Name {
			rec = n
		}
	}
	if rec == nil || len(rec.Labels) != 2 || rec.Labels[0].Key != "gpu" || rec.Labels[1].Key != "zone" ||
		rec.Capacity != 1 || strings.Join(rec.Models, ",") != "m-big" || strings.Join(rec.AccountRefs, ",") != "team-a" ||
		strings.Join(rec.RuntimeAdapters, ",") != "echo" || rec.ApiAddr != n2.APIAddr || rec.RuleVersion != fsm.RuleVersion {
		t.Fatalf("n2's record: %v", rec)
	}

	id := createSession(t, c, n3, "admission")
	move := func(to, model string, accept bool) *fakv1.Move {
		t.Helper()
		r, err := c.Sessions(n1).MoveSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.MoveSessionRequest{
			SessionId: id, ToNode: to, Model: model, AcceptDegradation: accept,
		}))
		if err != nil {
			t.Fatalf("move to %s: %v", to, err)
		}
		return waitMove(t, c, id, r.Msg.Move.MoveId, "an end", moveEnded)
	}
	if m := move(n1.Name, "m-big", true); m.State != fsm.MoveFailed || !strings.Contains(m.Reason, `model: no model "m-big"`) {
		t.Fatalf("move to a node without the model: %s %q", m.State, m.Reason)
	}
	if m := move(n2.Name, "m-big", false); m.State != fsm.MoveFailed || !strings.Contains(m.Reason, "degradation") {
		t.Fatalf("unaccepted model change: %s %q", m.State, m.Reason)
	}
	m := move(n2.Name, "m-big", true)
	if m.State != fsm.MoveCutoverCommitted || len(m.Degradation) == 0 || m.Admitted.GetModel() != "m-big" {
		t.Fatalf("accepted model change: %s %q, degradation %v, admitted %v", m.State, m.Reason, m.Degradation, m.Admitted)
	}
	if d := describe(t, c, n1, id); d.Placement.GetNode() != n2.Name || d.Placement.GetModel() != "m-big" {
		t.Fatalf("after the move: %v", d.Placement)
	}
	// n2 is full now.
	other := createSession(t, c, n3, "no room")
	r, err := c.Sessions(n1).MoveSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.MoveSessionRequest{SessionId: other, ToNode: n2.Name}))
	if err != nil {
		t.Fatal(err)
	}
	if m := waitMove(t, c, other, r.Msg.Move.MoveId, "an end", moveEnded); m.State != fsm.MoveFailed || !strings.Contains(m.Reason, "capacity: hosts 1 of 1") {
		t.Fatalf("move to a full node: %s %q", m.State, m.Reason)
	}
	checkMoveInvariants(t, c)
}
