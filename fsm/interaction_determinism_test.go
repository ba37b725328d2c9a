package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// mixGen writes a seeded random log of attachment, lease, input, approval
// and runner commands, budget charges, reset-ledger operations, provider
// hooks of guarded launches, node records and moves. Each entry is drawn
// against the state the log has produced so far (it is applied to gen as it is
// written), so that most commands are plausible and the log reaches deep
// turn states and lineages, while a share of them are wrong in every way a
// client, runner or hook can be wrong.
type mixGen struct {
	t        *testing.T
	r        *rand.Rand
	mr       *rand.Rand // the moves' and nodes' own stream
	gen      *harness
	log      []*raft.Log
	results  [][]*fsmpb.Result
	cmds     [][]*fsmpb.Command // the commands of each entry
	now      int64
	sessions []string // every session, in order of appearance
	live     []string // the active ones
	home     []string // s0-s3, or the child a clear or new replaced each with
	known    map[string]bool
	reqs     []string // request ids used so far
	moves    int      // move ids drawn so far
}

const (
	mixAttachments = 6
	mixLaunches    = 4
	// mixMaxLive bounds the active sessions (forks add them, clears
	// replace them), so that interactions stay concentrated enough to
	// reach deep turn states.
	mixMaxLive = 8 // the four home sessions, the two guarded ones, and forks
)

func newMixGen(t *testing.T, seed uint64) *mixGen {
	g := &mixGen{t: t, r: rand.New(rand.NewPCG(seed, 0x5eed)), mr: rand.New(rand.NewPCG(seed, 0x303e)), gen: newHarness(t), now: t0, known: map[string]bool{}}
	var cmds []*fsmpb.Command
	for i := range 4 {
		id := fmt.Sprintf("s%d", i)
		c := create(id)
		c.GetCreateSession().Placement = &fsmpb.Placement{Model: fmt.Sprintf("m%d", i%2), Node: fmt.Sprintf("n%d", i%3)}
		c.GetCreateSession().Policy = budgetPolicy(&fsmpb.Budget{Turns: 40, SpendMicros: 3000}, 4000)
		cmds = append(cmds, c)
	}
	// Two guarded sessions, created external as the API creates them; the
	// fleet runs the others, where turns happen.
	for i, provider := range []string{"claude", "codex"} {
		id, l := fmt.Sprintf("g%d", i), fmt.Sprintf("L%d", i)
		cmds = append(cmds, createExternal(id, l, provider, budgetPolicy(&fsmpb.Budget{Turns: 40, SpendMicros: 3000}, 4000)),
			bindLaunch(l, provider, id))
	}
	cmds = append(cmds, hookStart("L0", "startup", "p0"))
	for _, n := range mixNodes[:3] {
		cmds = append(cmds, registerNode(nodeRecord(n)))
	}
	g.add(cmds...)
	g.home = slices.Clone(g.sessions[:4]) // the fleet's: turns happen there
	return g
}

// add appends one entry stamped g.now and applies it to gen.
func (g *mixGen) add(cmds ...*fsmpb.Command) []*fsmpb.Result {
	for _, c := range cmds {
		c.TimeUnixNano = g.now
	}
	l := g.gen.entry(cmds...)
	rs := results(g.t, g.gen.f.Apply(l))
	g.log = append(g.log, l)
	g.results = append(g.results, rs)
	g.cmds = append(g.cmds, cmds)
	g.track(rs)
	return rs
}

// track learns the sessions an entry created (its results name them) and
// which sessions are still active.
func (g *mixGen) track(rs []*fsmpb.Result) {
	for _, r := range rs {
		id := r.GetSession().GetSessionId()
		b := r.GetBoundary()
		if b != nil {
			id = b.GetSession().GetSessionId()
		}
		if id != "" && !g.known[id] {
			g.known[id] = true
			g.sessions = append(g.sessions, id)
		}
		if i := slices.Index(g.home, b.GetPreviousSession()); i >= 0 && (b.GetAction() == "clear" || b.GetAction() == "new") {
			g.home[i] = id
		}
	}
	g.live = g.live[:0]
	for _, id := range g.sessions {
		if g.gen.session(id).State == fsmpb.SessionState_SESSION_STATE_ACTIVE {
			g.live = append(g.live, id)
		}
	}
}

func (g *mixGen) pick(n int) int { return g.r.IntN(n) }

func (g *mixGen) mpick(n int) int { return g.mr.IntN(n) }

func (g *mixGen) attachment() string { return fmt.Sprintf("a%d", g.pick(mixAttachments)) }

func (g *mixGen) ttl() int64 {
	if g.pick(40) == 0 {
		return int64(g.pick(2)) * MaxTTL * 2 // 0 or too long: INVALID_ARGUMENT
	}
	return MinTTL + g.r.Int64N(30*sec)
}

// holder is the lease holder of id now, or a random attachment.
func (g *mixGen) holder(s *fsmpb.Session) string {
	if h := LeaseHolder(s, g.now); h != "" && g.pick(5) != 0 {
		return h
	}
	return g.attachment()
}

// epoch is the session's current epoch (fresh and resume move it), or
// sometimes a stale or future one.
func (g *mixGen) epoch(s *fsmpb.Session) uint64 {
	if g.pick(15) == 0 {
		return []uint64{0, s.Epoch - 1, s.Epoch + 1}[g.pick(3)] // STALE_EPOCH
	}
	return s.Epoch
}

var runnerKindList = []string{KindTurnStarted, KindOutput, KindTurnCompleted, KindToolCall, KindToolResult, KindApprovalRequested}

// runnerEvents is what a runner would write next, or (sometimes) nonsense.
func (g *mixGen) runnerEvents(s *fsmpb.Session) []*fsmpb.EventInput {
	if g.pick(4) == 0 {
		var evs []*fsmpb.EventInput
		for range 1 + g.pick(3) {
			evs = append(evs, ev(runnerKindList[g.pick(len(runnerKindList))], "any"))
		}
		return evs
	}
	switch {
	case s.TurnInputSeq == 0:
		return []*fsmpb.EventInput{ev(KindTurnStarted, ""), ev(KindOutput, "thinking")}
	case s.PendingApprovalSeq != 0:
		return []*fsmpb.EventInput{ev(KindToolResult, "ran")} // TURN_ORDER until answered
	}
	switch g.pick(3) {
	case 0:
		return []*fsmpb.EventInput{ev(KindToolCall, "ls"), ev(KindApprovalRequested, "may I?")}
	case 1:
		return []*fsmpb.EventInput{ev(KindOutput, "chunk"), ev(KindOutput, "chunk")}
	}
	return []*fsmpb.EventInput{ev(KindOutput, "bye"), ev(KindTurnCompleted, "")}
}

func (g *mixGen) launch() string { return fmt.Sprintf("L%d", g.pick(mixLaunches)) }

// providerID draws from a small pool, so that hooks and clears repeat.
func (g *mixGen) providerID() string { return fmt.Sprintf("p%d", g.pick(6)) }

// usage is a model request's charge: sometimes small, sometimes large
// enough to exhaust an axis.
func (g *mixGen) usage() (*fsmpb.Budget, uint64) {
	return &fsmpb.Budget{Turns: uint64(g.pick(2)), OutputTokens: uint64(g.pick(500)), Queries: 1,
		SpendMicros: uint64(g.pick(300)), ToolCalls: uint64(g.pick(3))}, uint64(g.pick(900))
}

var (
	mixHookSources = []string{"startup", "startup", "resume", "compact", "clear", "clear", "fork", "bogus"}
	mixEndReasons  = []string{"clear", "exit", "logout", "prompt_input_exit", "other"}
	mixStopReasons = []string{"", StopUserClear, StopUserNew, StopProviderClear}
)

// ledgerCommand draws a reset-ledger or launch command on session s.
func (g *mixGen) ledgerCommand(s *fsmpb.Session) *fsmpb.Command {
	id := s.SessionId
	switch g.pick(10) {
	case 0:
		return fresh(id, g.providerID())
	case 1:
		return reset(id, g.providerID()) // BUSY while a turn runs
	case 2:
		return clearCmd(id, []string{"clear", "new"}[g.pick(2)], mixStopReasons[g.pick(len(mixStopReasons))], "", g.providerID())
	case 3:
		if len(g.live) >= mixMaxLive {
			return fresh(id, g.providerID())
		}
		// Sometimes an existing fork (a no-op) or another session's id
		// (ALREADY_EXISTS), sometimes past the head (INVALID_ARGUMENT).
		return forkCmd(id, uint64(g.pick(int(s.HeadSeq)+2)), fmt.Sprintf("f%d", g.pick(40)), g.providerID())
	case 4:
		// A launch takes over a session: one that is external already
		// (another launch's), or sometimes a fork the fleet runs, which
		// then leaves the fleet for good; never a home session, where
		// turns must go on.
		if !IsExternal(s.Placement) && (slices.Contains(g.home, id) || g.pick(4) != 0) {
			return hookEnd(g.launch(), mixEndReasons[g.pick(len(mixEndReasons))], g.providerID())
		}
		return bindLaunch(g.launch(), []string{"claude", "codex", "gemini"}[g.pick(3)], id)
	case 5:
		return hookEnd(g.launch(), mixEndReasons[g.pick(len(mixEndReasons))], g.providerID())
	}
	launch, source, pid := g.launch(), mixHookSources[g.pick(len(mixHookSources))], g.providerID()
	if source == "fork" && len(g.live) >= mixMaxLive {
		source = "compact"
	}
	if l, err := g.gen.f.Launch(launch); err == nil && l.ProviderSessionId != "" && g.pick(2) == 0 {
		pid = l.ProviderSessionId // a redelivery, or the next turn's Codex startup: a no-op
	}
	return withMetadata(hookStart(launch, source, pid), `{"cwd":"/w"}`)
}

var (
	mixNodes       = []string{"n0", "n1", "n2", "n3"}
	mixMoveCauses  = []string{MoveCauseOperator, MoveCauseOperator, MoveCauseDrain, MoveCauseRecovery}
	mixDegradation = []string{"cold cache"}
)

// nodeCommand registers a node (sometimes with unsorted labels) or drains
// or undrains one (sometimes one never registered, sometimes to the value
// it has).
func (g *mixGen) nodeCommand() *fsmpb.Command {
	name := mixNodes[g.mpick(len(mixNodes))]
	switch g.mpick(5) {
	case 0, 1:
		n := nodeRecord(name)
		n.Capacity = uint32(g.mpick(10))
		if g.mpick(3) == 0 {
			slices.Reverse(n.Labels) // INVALID_ARGUMENT
		}
		return registerNode(n)
	case 2:
		name = "n9" // NOT_FOUND
	}
	return setDraining(name, g.mpick(2) == 0)
}

// digest is JournalDigest over events 1..seq of id in gen's replica (up
// to its head if seq lies past it).
func (g *mixGen) digest(id string, seq uint64) string {
	if seq == 0 {
		return JournalDigest(nil)
	}
	evs, _, _ := g.gen.f.Events(id, 1, int(min(seq, 1<<20)))
	return JournalDigest(evs)
}

// strandCommand marks or unmarks s as stranded on its node (sometimes
// naming another node: INVALID_ARGUMENT when marking; BUSY while a move
// is open, a no-op when already so).
func (g *mixGen) strandCommand(s *fsmpb.Session) *fsmpb.Command {
	node := s.GetPlacement().GetNode()
	if node == "" || g.mpick(6) == 0 {
		node = mixNodes[g.mpick(len(mixNodes))]
	}
	return markStranded(s.SessionId, node, g.mpick(3) != 0)
}

// moveCommand draws a move command on session s: with no move open, mostly
// a new request (sometimes an invalid one, a retry of the last, or a step
// or failure of a move that is over); with one open, mostly its next step
// as the controller and runners would commit it, sometimes a failure, a
// second request (BUSY), a step of another state (MOVE_STATE) or of
// another move, or a wrong checkpoint or restore.
func (g *mixGen) moveCommand(s *fsmpb.Session) *fsmpb.Command {
	id, m := s.SessionId, s.Move
	if !MoveOpen(m) {
		switch g.mpick(12) {
		case 0:
			return moveFail(id, "mv0", "late", false) // no such move: MOVE_STATE
		case 1:
			if m != nil {
				return moveFail(id, m.MoveId, "late", g.mpick(2) == 0) // no-op
			}
		case 2, 3:
			if m != nil {
				return moveTo(id, m.MoveId, mixNodes[g.mpick(len(mixNodes))]) // no-op
			}
		case 4:
			return g.moveStep(s, m.GetMoveId(), moveStates[g.mpick(len(moveStates))]) // MOVE_STATE
		}
		return g.newMove(s)
	}
	state, moveID := m.State, m.MoveId
	switch g.mpick(16) {
	case 0:
		return moveFail(id, moveID, "deadline", state == MoveSafePointRequested && g.mpick(2) == 0)
	case 1:
		return g.newMove(s) // BUSY
	case 2:
		state = moveStates[g.mpick(len(moveStates))] // MOVE_STATE unless it is the right one
	case 3:
		moveID = fmt.Sprintf("mv%d", g.mpick(g.moves+1)) // most likely another move's
	}
	return g.moveStep(s, moveID, state)
}

func (g *mixGen) newMove(s *fsmpb.Session) *fsmpb.Command {
	g.moves++
	target := &fsmpb.Placement{Node: mixNodes[g.mpick(len(mixNodes))]}
	switch g.mpick(8) {
	case 0:
		target.Node = "" // any admitted node
	case 1:
		target.Model = fmt.Sprintf("m%d", g.mpick(3))
	}
	cause := mixMoveCauses[g.mpick(len(mixMoveCauses))]
	if g.mpick(30) == 0 {
		cause = "whim" // INVALID_ARGUMENT
	}
	c := requestMove(s.SessionId, fmt.Sprintf("mv%d", g.moves), target, cause)
	c.GetRequestMove().SafePointTimeoutNanos = 30 * sec
	c.GetRequestMove().AcceptDegradation = g.mpick(2) == 0
	return c
}

// moveStep is the command that takes a move from state to the next one.
func (g *mixGen) moveStep(s *fsmpb.Session, moveID, state string) *fsmpb.Command {
	id, m := s.SessionId, s.Move
	switch state {
	case MoveSafePointRequested:
		// At the head, with the source's digest; BUSY while a turn runs.
		seq := s.HeadSeq
		switch g.mpick(12) {
		case 0:
			seq = 0 // INVALID_ARGUMENT
		case 1:
			seq = s.HeadSeq + 1 // INVALID_ARGUMENT
		case 2:
			seq = uint64(1 + g.mpick(int(s.HeadSeq)))
		}
		epoch := s.Epoch
		if g.mpick(15) == 0 {
			epoch = []uint64{0, s.Epoch - 1, s.Epoch + 1}[g.mpick(3)] // STALE_EPOCH
		}
		return moveCheckpoint(id, moveID, epoch, seq, g.digest(id, seq))
	case MoveCheckpointed:
		p := admitted(s)
		if m.GetTarget().GetNode() == "" {
			p.Node = mixNodes[g.mpick(len(mixNodes))]
		}
		var degradation []string
		if p.Model != s.Placement.GetModel() || g.mpick(10) == 0 {
			degradation = mixDegradation // INVALID_ARGUMENT unless accepted
		}
		if g.mpick(25) == 0 {
			p.Node = "" // INVALID_ARGUMENT
		}
		return moveAdmit(id, moveID, p, []string{"alive", "capacity"}, degradation)
	case MoveAdmitted:
		// The destination digests its replica up to the checkpoint; one
		// lagging or diverged gets another digest (DIGEST_MISMATCH).
		seq := m.GetCheckpointSeq()
		if seq > 0 && g.mpick(4) == 0 {
			seq--
		}
		epoch := s.Epoch + 1
		if g.mpick(6) == 0 {
			epoch = []uint64{s.Epoch, s.Epoch + 2}[g.mpick(2)] // STALE_EPOCH
		}
		return moveRestore(id, moveID, epoch, g.digest(id, seq))
	case MoveRestored:
		return moveCutover(id, moveID)
	}
	return moveFail(id, moveID, "deadline", g.mpick(2) == 0)
}

// command draws one command against the current state of gen.
func (g *mixGen) command() *fsmpb.Command {
	s := g.target(g.pick)
	id := s.SessionId
	var c *fsmpb.Command
	switch g.pick(14) {
	case 12:
		u, ctx := g.usage()
		if g.pick(3) == 0 {
			c = launchUsage(g.launch(), u, ctx) // no trace id: the launch's default session
		} else {
			c = recordUsage(id, u, ctx)
		}
	case 13:
		c = g.ledgerCommand(s)
	case 0:
		c = attachCmd(id, g.attachment(), []string{"terminal", "browser", "hook"}[g.pick(3)], "c", g.ttl())
	case 1:
		c = keepAlive(id, g.attachment(), g.ttl())
	case 2:
		c = detach(id, g.attachment(), []string{"", DetachExpired, DetachExpired}[g.pick(3)])
	case 3:
		c = takeLease(id, g.attachment(), g.pick(2) == 0, g.ttl())
	case 4:
		c = renewLease(id, g.holder(s), g.ttl())
	case 5:
		if g.pick(2) == 0 {
			c = releaseLease(id, "", LeaseExpired) // the reaper
		} else {
			c = releaseLease(id, g.holder(s), "")
		}
	case 6, 7:
		c = submitInput(id, g.holder(s), g.epoch(s), fmt.Sprintf("input %d", len(g.log)))
	case 8:
		seq := s.PendingApprovalSeq
		if seq == 0 || g.pick(5) == 0 {
			seq = uint64(g.pick(int(s.HeadSeq) + 1))
		}
		c = answerApproval(id, g.attachment(), seq, g.pick(3) != 0, "")
	case 9, 10:
		c = runnerAppend(id, g.epoch(s), g.runnerEvents(s)...)
	default:
		switch g.pick(30) {
		case 0:
			if slices.Contains(g.home, id) {
				// A home session is not stopped for good: a person's /new
				// stops it and hands its place to the child.
				c = clearCmd(id, "new", StopUserNew, "", g.providerID())
			} else {
				c = stop(id, "")
			}
		case 1:
			c = appendEv(id, ev(KindOutput, "not mine"))
		default:
			c = appendEv(id, ev(KindNote, "n"))
		}
	}
	return g.withRequestID(c, g.pick)
}

// target draws the session a command acts on: mostly the four home
// sessions, so that turns get deep; sometimes any active session (forks),
// sometimes any at all (stopped ones too). pick draws from one of g's
// random streams.
func (g *mixGen) target(pick func(int) int) *fsmpb.Session {
	pool := g.home
	switch pick(10) {
	case 0:
		pool = g.sessions
	case 1, 2:
		if len(g.live) > 0 {
			pool = g.live
		}
	}
	return g.gen.session(pool[pick(len(pool))])
}

// withRequestID gives c a fresh request id, or sometimes one used before
// (a retry, perhaps with another body), or none.
func (g *mixGen) withRequestID(c *fsmpb.Command, pick func(int) int) *fsmpb.Command {
	switch {
	case len(g.reqs) > 0 && pick(20) == 0:
		c.RequestId = g.reqs[pick(len(g.reqs))]
	case pick(4) == 0:
		c.RequestId = fmt.Sprintf("r%d", len(g.reqs))
		g.reqs = append(g.reqs, c.RequestId)
	}
	return c
}

// mixLog is the seeded log: n entries of 1-6 commands, time advancing by
// up to 4 s an entry so that attachments and leases (1-31 s) lapse. Half
// the entries also carry a move or node command, on top of the others and
// drawn from a stream of their own, so that the interactions stay as deep
// as they were without them.
func mixLog(t *testing.T, seed uint64, n int) *mixGen {
	g := newMixGen(t, seed)
	for range n {
		g.now += g.r.Int64N(4 * sec)
		cmds := make([]*fsmpb.Command, 1+g.pick(6))
		for i := range cmds {
			cmds[i] = g.command()
		}
		switch g.mpick(16) {
		case 0:
			cmds = slices.Insert(cmds, g.mpick(len(cmds)+1), g.withRequestID(g.nodeCommand(), g.mpick))
		case 1, 2, 3, 4, 5, 6, 7:
			cmds = slices.Insert(cmds, g.mpick(len(cmds)+1), g.withRequestID(g.moveCommand(g.target(g.mpick)), g.mpick))
		case 8:
			cmds = slices.Insert(cmds, g.mpick(len(cmds)+1), g.withRequestID(g.strandCommand(g.target(g.mpick)), g.mpick))
		}
		g.add(cmds...)
	}
	return g
}

// replayResults is replay that also returns every entry's results.
func replayResults(t *testing.T, log []*raft.Log, sizes ...int) (*FSM, [][]*fsmpb.Result) {
	t.Helper()
	f := newHarness(t).f
	var out [][]*fsmpb.Result
	for i, n := 0, 0; i < len(log); n++ {
		end := min(i+sizes[n%len(sizes)], len(log))
		for _, v := range f.ApplyBatch(log[i:end]) {
			out = append(out, results(t, v))
		}
		i = end
	}
	return f, out
}

func equalResults(t *testing.T, got, want [][]*fsmpb.Result) {
	t.Helper()
	for i := range want {
		for j := range want[i] {
			if !proto.Equal(got[i][j], want[i][j]) {
				t.Fatalf("entry %d command %d: result %v, want %v", i, j, got[i][j], want[i][j])
			}
		}
	}
}

func TestInteractionMixIsDeterministic(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			g := mixLog(t, seed, 400)
			want := dump(t, g.gen.f, true)
			for _, sizes := range [][]int{{1}, {len(g.log)}, {64}, {1, 3, 7, 2}} {
				a, ra := replayResults(t, g.log, sizes...)
				b, rb := replayResults(t, g.log, sizes...)
				equalResults(t, ra, g.results)
				equalResults(t, rb, g.results)
				// Same content, key for key and byte for byte. The files
				// themselves may differ in page layout (see
				// TestDeterministicSnapshots).
				sa, sb := snapshotBytes(t, a), snapshotBytes(t, b)
				ca, cb := snapshotContent(t, sa), snapshotContent(t, sb)
				if ca != cb {
					t.Fatalf("batch sizes %v: two replicas' snapshots differ:\n%s", sizes, firstDiff(ca, cb))
				}
				if ca != want {
					t.Fatalf("batch sizes %v: snapshot differs from the generator's state:\n%s", sizes, firstDiff(ca, want))
				}
				t.Logf("batch sizes %v: snapshot files identical: %v", sizes, bytes.Equal(sa, sb))
			}
		})
	}
}

func TestInteractionMixCoverage(t *testing.T) {
	// The mix must reach the paths it claims to, or its determinism proves
	// little.
	mixCoverage(t, mixLog(t, 1, 800))
}

// mixCoverage fails unless the mix g reached every path listed.
func mixCoverage(t *testing.T, g *mixGen) {
	reasons := map[Reason]int{}
	actions := map[string]int{}
	noOps := 0
	// Outcomes of the move and node commands, by command and reason
	// ("no-op" for a no-op).
	moveOutcomes := map[string]int{}
	for i, rs := range g.results {
		for j, r := range rs {
			reason := ReasonOf(ResultError(r))
			reasons[reason]++
			if r.NoOp {
				noOps++
			}
			if b := r.GetBoundary(); b != nil {
				actions[b.Action]++
			}
			var name string
			switch g.cmds[i][j].Body.(type) {
			case *fsmpb.Command_RequestMove:
				name = "request"
			case *fsmpb.Command_MoveCheckpoint:
				name = "checkpoint"
			case *fsmpb.Command_MoveAdmit:
				name = "admit"
			case *fsmpb.Command_MoveRestore:
				name = "restore"
			case *fsmpb.Command_MoveCutover:
				name = "cutover"
			case *fsmpb.Command_MoveFail:
				name = "fail"
			case *fsmpb.Command_RegisterNode:
				name = "register"
			case *fsmpb.Command_SetDraining:
				name = "drain"
			case *fsmpb.Command_MarkStranded:
				name = "strand"
			default:
				continue
			}
			if r.NoOp {
				reason = "no-op"
			}
			moveOutcomes[name+" "+string(reason)]++
		}
	}
	t.Logf("reasons %v, no-ops %d, boundary actions %v", reasons, noOps, actions)
	t.Logf("move and node outcomes %v", moveOutcomes)
	for _, outcome := range []string{
		"request ", "request BUSY", "request INVALID_ARGUMENT", "request no-op", "request SESSION_STOPPED",
		"checkpoint ", "checkpoint BUSY", "checkpoint STALE_EPOCH", "checkpoint INVALID_ARGUMENT", "checkpoint MOVE_STATE",
		"admit ", "admit INVALID_ARGUMENT", "admit MOVE_STATE",
		"restore ", "restore DIGEST_MISMATCH", "restore STALE_EPOCH", "restore MOVE_STATE",
		"cutover ", "cutover MOVE_STATE",
		"fail ", "fail no-op", "fail MOVE_STATE",
		"register ", "register INVALID_ARGUMENT", "drain ", "drain no-op", "drain NOT_FOUND",
		"strand ", "strand no-op", "strand INVALID_ARGUMENT",
	} {
		if moveOutcomes[outcome] == 0 {
			t.Errorf("mix never produced the outcome %q", outcome)
		}
	}
	for _, action := range []string{"bound", "no_op", "fresh", "reset", "clear", "new", "fork", "resume", "compact", "end"} {
		if actions[action] == 0 {
			t.Errorf("mix never produced a %s boundary result", action)
		}
	}
	for _, reason := range []Reason{"", ReasonInvalidArgument, ReasonAlreadyExists, ReasonAttachmentNotFound,
		ReasonLeaseHeld, ReasonLeaseNotHeld, ReasonStaleEpoch, ReasonTurnOrder, ReasonNoPendingApproval,
		ReasonNotFound, ReasonSessionStopped, ReasonBusy, ReasonBudgetExhausted, ReasonMoveState, ReasonDigestMismatch,
		ReasonExternalRuntime} {
		if reasons[reason] == 0 {
			t.Errorf("mix never produced reason %q", reason)
		}
	}
	if noOps == 0 {
		t.Error("mix never produced a no-op")
	}
	kinds := map[string]int{}
	var turns, moves uint64
	steals, reaped := 0, map[string]int{}
	for _, id := range g.sessions {
		turns += g.gen.session(id).TurnsCompleted
		moves += g.gen.session(id).MovesCompleted
		evs, _, _ := g.gen.f.Events(id, 1, 1<<20)
		for _, e := range evs {
			kinds[e.Kind]++
			switch {
			case e.Kind == KindLeaseTaken && bytes.Contains(e.Data, []byte(`"stolen_from"`)):
				steals++
			case (e.Kind == KindLeaseReleased || e.Kind == KindAttachmentLeft) && bytes.Contains(e.Data, []byte(`"reason":"expired"`)):
				reaped[e.Kind]++
			}
		}
	}
	if steals == 0 || reaped[KindLeaseReleased] == 0 || reaped[KindAttachmentLeft] == 0 {
		t.Errorf("mix stole %d leases, reaped %v; want some of each", steals, reaped)
	}
	t.Logf("kinds %v, turns completed %d", kinds, turns)
	for kind := range allKinds() {
		if kinds[kind] == 0 && !clientKinds[kind] && kind != KindSessionStopped {
			t.Errorf("mix never wrote a %s event", kind)
		}
	}
	if turns == 0 {
		t.Error("mix never completed a turn")
	}
	t.Logf("moves completed %d", moves)
	if moves < 3 {
		t.Errorf("mix completed %d moves, want some", moves)
	}
}

func TestSnapshotRestorePreservesAttachmentsAndLeases(t *testing.T) {
	g := mixLog(t, 7, 200)
	// End on a known live attachment holding a live lease, whatever the
	// mix left behind.
	g.now += sec
	for _, r := range g.add(
		create("kept"),
		attachCmd("kept", "keep", "terminal", "kept", MaxTTL),
		attachCmd("kept", "a0", "browser", "other", MaxTTL),
		takeLease("kept", "keep", false, MaxTTL),
	) {
		wantErr(t, r, "")
	}
	sessions := append(g.sessions, "kept")
	src := g.gen

	dst := newHarness(t)
	interactive(t, dst, "local-only") // state Restore must replace
	if err := restoreBytes(dst.f, snapshotBytes(t, src.f)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got, want := dump(t, dst.f, true), dump(t, src.f, true); got != want {
		t.Fatalf("restored database differs:\n%s", firstDiff(got, want))
	}
	if _, err := dst.f.Session("local-only"); ReasonOf(err) != ReasonNotFound {
		t.Fatalf("pre-restore session survived: %v", err)
	}
	if dst.attachment("local-only", "a1") != nil {
		t.Fatal("pre-restore attachment survived")
	}
	live := 0
	for _, id := range sessions {
		s, d := src.session(id), dst.session(id)
		if !proto.Equal(s, d) {
			t.Fatalf("session %s restored as %v, want %v", id, d, s)
		}
		if LeaseHolder(d, g.now) != "" {
			live++
		}
		for _, a := range []string{"a0", "a1", "a2", "a3", "a4", "a5", "keep"} {
			if !proto.Equal(src.attachment(id, a), dst.attachment(id, a)) {
				t.Fatalf("attachment %s/%s restored as %v, want %v", id, a, dst.attachment(id, a), src.attachment(id, a))
			}
		}
	}
	if live == 0 {
		t.Fatal("no live lease at snapshot time; the round trip proved nothing")
	}

	// Both replicas go on from the same log and agree on who holds what.
	g.now += sec
	later := g.now + MaxTTL - 1 // the lease has lapsed, the kept-alive attachment not
	more := []*raft.Log{
		src.entry(at(g.now, takeLease("kept", "a0", false, 10*sec))),   // held by keep
		src.entry(at(g.now, submitInput("kept", "keep", 1, "after"))),  // the holder's input
		src.entry(at(g.now, keepAlive("kept", "keep", MaxTTL))),        // attachment restored
		src.entry(at(later, releaseLease("kept", "", LeaseExpired))),   // lapsed lease reaped
		src.entry(at(later, detach("kept", "keep", DetachExpired))),    // still alive: no-op
		src.entry(at(later, takeLease("kept", "a0", false, 10*sec))),   // free again
		src.entry(at(later, submitInput("kept", "keep", 1, "robbed"))), // not the holder now
	}
	var outs [2][]interface{}
	for i, f := range []*FSM{src.f, dst.f} {
		outs[i] = f.ApplyBatch(more)
	}
	for i := range more {
		a, b := results(t, outs[0][i]), results(t, outs[1][i])
		if !proto.Equal(a[0], b[0]) {
			t.Fatalf("entry %d after restore: %v on the source, %v on the restored replica", i, a[0], b[0])
		}
	}
	got := func(i int) *fsmpb.Result { return results(t, outs[1][i])[0] }
	wantErrMsg(t, got(0), ReasonLeaseHeld, "attachment keep")
	wantErr(t, got(1), "")
	wantErr(t, got(2), "")
	wantErr(t, got(3), "")
	wantNoOp(t, got(4))
	wantErr(t, got(5), "")
	wantErrMsg(t, got(6), ReasonLeaseNotHeld, "attachment a0")
	if s := dst.session("kept"); LeaseHolder(s, later) != "a0" || len(s.QueuedInputs) != 1 {
		t.Fatalf("after restore and more: lease %v queued %v", s.Lease, s.QueuedInputs)
	}
	if got, want := dump(t, dst.f, true), dump(t, src.f, true); got != want {
		t.Fatalf("replicas diverged after restore:\n%s", firstDiff(got, want))
	}
}
