package fsm

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Replicas must agree however raft groups entries into ApplyBatch calls (by
// timing, which differs between nodes) and wherever a snapshot cut the log
// before a restore (a lagging follower installs one). These tests replay
// one log through every command of dispatch in all those ways and compare
// the content (not the bytes: see TestDeterministicSnapshots) and every
// entry's results.

// fullLog is scriptLog followed by a script through every other command.
// Each entry is applied to gen with Apply as it is written (epochs,
// approval addresses and digests are read off gen) and checked to end as
// the script says. gen is the one-entry-per-Apply reference; want holds its
// results.
func fullLog(t testing.TB) (log []*raft.Log, want [][]*fsmpb.Result, gen *harness) {
	gen = newHarness(t)
	push := func(l *raft.Log) []*fsmpb.Result {
		rs := results(t, gen.f.Apply(l))
		log, want = append(log, l), append(want, rs)
		return rs
	}
	for _, l := range scriptLog(gen) {
		push(l)
	}
	add := func(cmds ...*fsmpb.Command) []*fsmpb.Result { return push(gen.entry(cmds...)) }
	no := func(reason Reason, cmds ...*fsmpb.Command) { // one entry; every command ends with reason
		t.Helper()
		for i, r := range add(cmds...) {
			if ReasonOf(ResultError(r)) != reason {
				t.Fatalf("entry %d command %d: %v, want %q", len(log)-1, i, r, reason)
			}
		}
	}
	ok := func(cmds ...*fsmpb.Command) { t.Helper(); no("", cmds...) } // success or a no-op
	epoch := func(id string) uint64 { return gen.session(id).Epoch }
	head := func(id string) uint64 { return gen.session(id).HeadSeq }
	later := func(d int64, c *fsmpb.Command) *fsmpb.Command { return at(gen.clock+d, c) }
	move := func(id, moveID, cause string, target *fsmpb.Placement) { // as the controller and runners would
		t.Helper()
		ok(requestMove(id, moveID, target, cause))
		cp := head(id)
		ok(moveCheckpoint(id, moveID, epoch(id), cp, gen.digest(id, cp)))
		ok(moveAdmit(id, moveID, admitted(gen.session(id)), admitChecks, nil))
		ok(moveRestore(id, moveID, NextEpoch(gen.session(id)), gen.digest(id, cp)), moveCutover(id, moveID))
	}

	// Node records and API tokens.
	unsorted := nodeRecord("n4")
	slices.Reverse(unsorted.Labels)
	ok(registerNode(nodeRecord("n1")), registerNode(nodeRecord("n2")), registerNode(nodeRecord("n3")))
	ok(setDraining("n3", true), setDraining("n3", true)) // then a no-op
	ok(createACL("acc1", "secret1", RoleOperator, "ops"), createACL("acc2", "secret2", RoleAgent, "ci"), revokeACL("acc1"))
	no(ReasonInvalidArgument, registerNode(unsorted), createACL("acc3", "secret3", "root", ""))
	no(ReasonNotFound, setDraining("n9", true), revokeACL("acc1"))
	no(ReasonAlreadyExists, createACL("acc3", "secret2", RoleRead, ""))

	// An interactive session: attachments, the lease, a turn with an
	// approval, usage up to its budget, lapsed leases and attachments.
	cw := createPolicy("w", budgetPolicy(&fsmpb.Budget{SpendMicros: 1000}, 5000))
	cw.GetCreateSession().Placement = sourcePlacement() // on n1
	ok(cw, attachCmd("w", "a1", "terminal", "tty", MaxTTL), attachCmd("w", "a2", "browser", "phone", MaxTTL), keepAlive("w", "a2", MaxTTL))
	no(ReasonAttachmentNotFound, keepAlive("w", "a9", MaxTTL))
	no(ReasonAlreadyExists, attachT("w", "a1"))
	no(ReasonInvalidArgument, attachCmd("w", "a3", "terminal", "x", 0))
	ok(req("lease-w", takeLease("w", "a1", false, 30*sec)))
	no(ReasonLeaseHeld, takeLease("w", "a2", false, 30*sec))
	ok(req("lease-w", takeLease("w", "a2", true, 30*sec))) // a retry: the first result, no steal
	ok(renewLease("w", "a1", 30*sec), submitInput("w", "a1", 1, "hello"))
	no(ReasonLeaseNotHeld, renewLease("w", "a2", 30*sec), submitInput("w", "a2", 1, "me too"))
	no(ReasonStaleEpoch, submitInput("w", "a1", 2, "future"), runnerAppend("w", 2, ev(KindOutput, "x")))
	no(ReasonTurnOrder, runnerAppend("w", 1, ev(KindOutput, "before the turn")))
	ok(runnerAppend("w", 1, ev(KindTurnStarted, ""), ev(KindOutput, "hi"), ev(KindToolCall, "ls"), ev(KindApprovalRequested, "may I?")))
	approval := gen.session("w").PendingApprovalSeq
	no(ReasonTurnOrder, runnerAppend("w", 1, ev(KindToolResult, "too early")))
	no(ReasonNoPendingApproval, answerApproval("w", "a2", approval-1, true, ""))
	ok(answerApproval("w", "a2", approval, true, "go"), answerApproval("w", "a2", approval, false, "")) // then a no-op
	ok(runnerAppend("w", 1, ev(KindToolResult, "a b"), ev(KindOutput, "done"), ev(KindTurnCompleted, "")))
	ok(recordUsage("w", &fsmpb.Budget{Turns: 1, SpendMicros: 600, ToolCalls: 1}, 100))
	no(ReasonBudgetExhausted, spend("w", 500), contextUse("w", 5000))           // refusals journaled
	ok(takeLease("w", "a2", true, 30*sec))                                      // a steal
	ok(releaseLease("w", "a2", ""), releaseLease("w", "a2", ""))                // then a no-op
	ok(takeLease("w", "a1", false, 5*sec), releaseLease("w", "", LeaseExpired)) // not lapsed: a no-op
	ok(later(6*sec, releaseLease("w", "", LeaseExpired)))                       // lapsed: released
	ok(attachCmd("w", "a3", "hook", "h", 2*sec), detach("w", "a2", ""), detach("w", "a2", ""))
	ok(later(3*sec, detach("w", "a3", DetachExpired)), detach("w", "a1", DetachExpired)) // a1 lives: a no-op

	// A workspace copy, fenced by the host's epoch.
	wsCopy := func(id string, epoch uint64) *fsmpb.Command {
		return &fsmpb.Command{Body: &fsmpb.Command_RecordWorkspaceCopy{RecordWorkspaceCopy: &fsmpb.RecordWorkspaceCopy{
			SessionId: id, Epoch: epoch, Copy: &fsmpb.WorkspaceCopy{Workspace: &fsmpb.Workspace{Digest: "sha256:c", Bytes: 3}, Node: "n2", AfterInput: 3}}}}
	}
	ok(wsCopy("w", 1))
	no(ReasonStaleEpoch, wsCopy("w", 9))

	// Interrupts: by the lease holder, then by a move that induces its
	// safe point.
	ok(createOn("i", "n1"), attachT("i", "a1"), attachT("i", "a2"), takeLease("i", "a1", false, MaxTTL))
	no(ReasonNoTurnRunning, interruptTurn("i", "a1", 1))
	ok(submitInput("i", "a1", 1, "long"), runnerAppend("i", 1, ev(KindTurnStarted, "")))
	no(ReasonLeaseNotHeld, interruptTurn("i", "a2", 1))
	ok(interruptTurn("i", "a1", 1))
	no(ReasonNoTurnRunning, interruptTurn("i", "a1", 1))
	no(ReasonTurnOrder, runnerAppend("i", 1, ev(KindTurnCompleted, "late")))
	ok(submitInput("i", "a1", 1, "again"), runnerAppend("i", 1, ev(KindTurnStarted, "")))
	mi := moveTo("i", "mvi", "n2")
	mi.GetRequestMove().Interrupt = true
	ok(mi)
	cpi := head("i")
	ok(moveCheckpoint("i", "mvi", 1, cpi, gen.digest("i", cpi)))

	// A session the fleet ran until a guarded launch took it over, with a
	// turn in flight; then every provider hook and ledger operation.
	ok(createPolicy("g", budgetPolicy(&fsmpb.Budget{Turns: 50}, 4000)), attachT("g", "t1"), takeLease("g", "t1", false, MaxTTL))
	ok(submitInput("g", "t1", epoch("g"), "work"), runnerAppend("g", epoch("g"), ev(KindTurnStarted, "")))
	no(ReasonBusy, reset("g", "p4"))
	ok(runnerAppend("g", epoch("g"), ev(KindTurnCompleted, "")), reset("g", "p4"))
	ok(submitInput("g", "t1", epoch("g"), "more"), runnerAppend("g", epoch("g"), ev(KindTurnStarted, "")))
	ok(bindLaunch("L1", "claude", "g"), bindLaunch("L1", "claude", "g")) // the turn ends; then a no-op
	no(ReasonExternalRuntime, submitInput("g", "t1", epoch("g"), "typed"), interruptTurn("g", "t1", epoch("g")), moveTo("g", "mvg", "n2"))
	ok(hookStart("L1", "startup", "p1"), hookStart("L1", "startup", "p1"), withMetadata(hookStart("L1", "compact", "p1"), `{"trigger":"auto"}`))
	ok(hookStart("L1", "resume", "p2"), launchUsage("L1", &fsmpb.Budget{Queries: 1, OutputTokens: 40}, 300))
	ok(fresh("g", "p3"))
	ok(forkCmd("g", 3, "gf", "pf"), forkCmd("g", 3, "gf", "pf")) // then a no-op
	no(ReasonAlreadyExists, forkCmd("g", 0, "w", ""))
	no(ReasonInvalidArgument, reset("g", ""), forkCmd("g", 999, "gf2", ""), hookStart("L1", "bogus", "p8"))
	ok(hookStart("L1", "fork", "p5"), hookEnd("L1", "clear", "p5"))    // the launch follows its fork
	ok(hookStart("L1", "clear", "p6"), hookStart("L1", "clear", "p6")) // a clear, then its redelivery
	ok(req("new-g", clearCmd("g", "new", StopUserNew, "", "p7")), clearCmd("g", "new", StopUserNew, "", "p7"))
	no(ReasonSessionStopped, spend("g", 1))
	no(ReasonNotFound, hookEnd("L9", "exit", "p1"))
	ok(launchUsage("L1", &fsmpb.Budget{Turns: 1}, 10))

	// An operator's move of w, with refusals on the way.
	ok(moveTo("w", "mv1", "n2"), moveTo("w", "mv1", "n2")) // then a no-op
	no(ReasonBusy, moveTo("w", "mv2", "n3"), markStranded("w", "n1", true))
	no(ReasonMoveState, moveCutover("w", "mv1"))
	cp := head("w")
	ok(moveCheckpoint("w", "mv1", epoch("w"), cp, gen.digest("w", cp)))
	ok(moveAdmit("w", "mv1", admitted(gen.session("w")), admitChecks, nil))
	next := NextEpoch(gen.session("w"))
	no(ReasonDigestMismatch, moveRestore("w", "mv1", next, hexDigest))
	no(ReasonStaleEpoch, moveRestore("w", "mv1", next+1, gen.digest("w", cp)))
	ok(moveRestore("w", "mv1", next, gen.digest("w", cp)), moveCutover("w", "mv1"))
	no(ReasonStaleEpoch, runnerAppend("w", next-1, ev(KindOutput, "from the old node")))
	// A failed move, then an unsafe one: no safe point while a turn runs.
	ok(moveTo("w", "mv2", "n1"))
	ok(moveCheckpoint("w", "mv2", epoch("w"), head("w"), gen.digest("w", head("w"))))
	ok(moveFail("w", "mv2", "destination died", false), moveFail("w", "mv2", "again", false)) // then a no-op
	ok(takeLease("w", "a1", false, MaxTTL), submitInput("w", "a1", epoch("w"), "long job"), runnerAppend("w", epoch("w"), ev(KindTurnStarted, "")))
	ok(moveTo("w", "mv3", "n1"))
	no(ReasonBusy, moveCheckpoint("w", "mv3", epoch("w"), head("w"), gen.digest("w", head("w"))))
	ok(moveFail("w", "mv3", "no safe point in 30s", true), runnerAppend("w", epoch("w"), ev(KindTurnCompleted, "")))

	// A recovery off a dead node, checkpointed with a turn in flight that
	// the new epoch finishes.
	ok(createOn("r", "n1"), attachT("r", "a1"), takeLease("r", "a1", false, MaxTTL), submitInput("r", "a1", 1, "job"),
		runnerAppend("r", 1, ev(KindTurnStarted, "")))
	move("r", "mv4", MoveCauseRecovery, nil)
	no(ReasonStaleEpoch, runnerAppend("r", 1, ev(KindOutput, "from the dead")))
	ok(runnerAppend("r", 2, ev(KindTurnCompleted, "")))
	// Stranded, unstranded, stranded again and moved off by an operator
	// (the cutover clears the mark).
	ok(createManual("st", RecoverManual))
	no(ReasonInvalidArgument, markStranded("st", "n2", true))          // it runs on n1
	ok(markStranded("st", "n1", true), markStranded("st", "n1", true)) // then a no-op
	ok(markStranded("st", "n1", false), markStranded("st", "n1", true))
	move("st", "mv5", MoveCauseOperator, &fsmpb.Placement{Node: "n2"})
	ok(moveTo("r", "mv6", "n1"), stop("r", "DONE"), stop("r", "AGAIN"), moveFail("r", "mv6", "late", false)) // the stop fails the move
	no(ReasonSessionStopped, moveTo("r", "mv7", "n3"))
	no(ReasonNotStopped, purgeCmd(PurgeCauseOperator, 0, "w"))
	ok(purgeCmd(PurgeCauseRetention, gen.clock+1, "st", "r", "nobody")) // r purged; st active and nobody absent skipped
	no(ReasonNotFound, purgeCmd(PurgeCauseOperator, 0, "r"))

	// One entry of many kinds: compare-and-append, a request id used twice,
	// a command with no body, an over-long request id, a client writing a
	// runner's kind, a stale compare-and-append; then odd entries.
	add(appendIf("w", head("w"), ev("checkpoint", "cas")), req("twice", appendEv("w", ev(KindNote, "one"))),
		req("twice", appendEv("st", ev(KindNote, "two"))), &fsmpb.Command{},
		req(strings.Repeat("x", MaxRequestIDBytes+1), appendEv("w", ev(KindNote, "long id"))),
		appendEv("w", ev(KindOutput, "not mine")), appendIf("w", 1, ev(KindNote, "stale")))
	push(gen.rawEntry(raft.LogNoop, nil))
	push(gen.rawEntry(raft.LogCommand, []byte{byte(EntryBatch), 0xff, 0xff})) // undecodable

	// A leader whose clock runs behind, then a jump of the leader clock past
	// the dedup window: a retry of a forgotten request applies anew.
	ok(req("mk", create("x1")), req("behind", at(gen.clock-5*sec, keepAlive("w", "a1", MaxTTL))))
	ok(req("mk", create("x2"))) // a retry: x1's result
	no(ReasonNotFound, appendEv("x2", ev(KindNote, "x2 was never created")))
	ok(later(DedupWindow+sec, appendEv("w", ev(KindNote, "much later"))))
	ok(req("mk", create("x3")), appendEv("x3", ev(KindNote, "created anew")))
	push(gen.rawEntry(raft.LogConfiguration, []byte("config")))
	return log, want, gen
}

// applyIn applies log to f in ApplyBatch calls of the given sizes (the last
// one cycled) and returns each entry's results.
func applyIn(t *testing.T, f *FSM, log []*raft.Log, sizes []int) [][]*fsmpb.Result {
	t.Helper()
	out := make([][]*fsmpb.Result, 0, len(log))
	for i, n := 0, 0; i < len(log); n++ {
		end := min(i+sizes[min(n, len(sizes)-1)], len(log))
		for _, v := range f.ApplyBatch(log[i:end]) {
			out = append(out, results(t, v))
		}
		i = end
	}
	return out
}

// randomSizes draws batch sizes of 1-24 entries covering n entries.
func randomSizes(r *rand.Rand, n int) (sizes []int) {
	for sum := 0; sum < n; sum += sizes[len(sizes)-1] {
		sizes = append(sizes, 1+r.IntN(24))
	}
	return sizes
}

// stateDiff is "" if two FSMs hold the same content: the same buckets with
// the same keys and values (the applied index included), whatever pages
// bbolt put them on. Otherwise it is the first difference of their dumps.
// (It walks the two databases side by side rather than comparing dumps:
// rendering every key in hex made the snapshot test three times slower.)
func stateDiff(t testing.TB, got, want *FSM) string {
	t.Helper()
	var same bool
	err := got.view(func(g *bolt.Tx) error {
		return want.view(func(w *bolt.Tx) error {
			same = sameKeys(g.Cursor(), w.Cursor(), func(bucket []byte) bool {
				return sameKeys(g.Bucket(bucket).Cursor(), w.Bucket(bucket).Cursor(), nil)
			})
			return nil
		})
	})
	if err != nil {
		t.Fatalf("stateDiff: %v", err)
	}
	if same {
		return ""
	}
	return firstDiff(dump(t, got, true), dump(t, want, true))
}

// sameKeys walks two cursors in step: same keys, same values, and (if
// within is given) the same content within each key's bucket.
func sameKeys(x, y *bolt.Cursor, within func(key []byte) bool) bool {
	kx, vx := x.First()
	ky, vy := y.First()
	for kx != nil && ky != nil {
		if !bytes.Equal(kx, ky) || !bytes.Equal(vx, vy) || (within != nil && !within(kx)) {
			return false
		}
		kx, vx = x.Next()
		ky, vy = y.Next()
	}
	return kx == nil && ky == nil
}

// resultsDiff is the first difference between two runs' results of the
// entries from the given one on, or "".
func resultsDiff(got, want [][]*fsmpb.Result, from int) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d entries' results, want %d", len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			return fmt.Sprintf("entry %d: %d results, want %d", from+i, len(got[i]), len(want[i]))
		}
		for j := range want[i] {
			if !proto.Equal(got[i][j], want[i][j]) {
				return fmt.Sprintf("entry %d command %d: %v, want %v", from+i, j, got[i][j], want[i][j])
			}
		}
	}
	return ""
}

func TestReplayDeterministicAcrossBatching(t *testing.T) {
	log, want, gen := fullLog(t)
	n := len(log)
	batchings := map[string][]int{"one entry per batch": {1}, "the whole log in one batch": {n}}
	r := rand.New(rand.NewPCG(2024, 11))
	for i := range 8 {
		batchings[fmt.Sprint("random split ", i)] = randomSizes(r, n)
	}
	for _, name := range slices.Sorted(maps.Keys(batchings)) {
		sizes := batchings[name]
		t.Run(name, func(t *testing.T) {
			f := newHarness(t).f
			if d := resultsDiff(applyIn(t, f, log, sizes), want, 0); d != "" {
				t.Fatalf("results differ from one entry per Apply: %s", d)
			}
			if d := stateDiff(t, f, gen.f); d != "" {
				t.Fatalf("state differs from one entry per Apply:\n%s", d)
			}
		})
	}
	t.Run("a divergence is caught", func(t *testing.T) {
		// What a nondeterministic rule would cause on one replica: an event
		// more, a result changed, an applied index ahead.
		f := newHarness(t).f
		rs := applyIn(t, f, append(log[:n:n], gen.entry(appendEv("w", ev(KindNote, "only here")))), []int{n + 1})
		if stateDiff(t, f, gen.f) == "" || resultsDiff(rs, want, 0) == "" {
			t.Fatal("one more entry on one replica went unnoticed")
		}
		altered, i := slices.Clone(want), n-2 // the entry that creates x3
		altered[i] = []*fsmpb.Result{proto.CloneOf(want[i][0]), want[i][1]}
		altered[i][0].NoOp = true
		if resultsDiff(altered, want, 0) == "" {
			t.Fatal("an altered result went unnoticed")
		}
		g := newHarness(t).f
		applyIn(t, g, append(log[:n:n], gen.rawEntry(raft.LogNoop, nil)), []int{n + 1})
		if stateDiff(t, g, gen.f) == "" {
			t.Fatal("an applied index ahead went unnoticed")
		}
	})
}

func TestReplayDeterministicAcrossSnapshots(t *testing.T) {
	// A replica restored from a snapshot taken after any entry k, then fed
	// the rest of the log, ends where the others do and returns the same
	// results for the entries after k.
	log, want, gen := fullLog(t)
	r := rand.New(rand.NewPCG(7, 7))
	a := newHarness(t).f // fed one entry per Apply, snapshotted after each
	for k := 0; k <= len(log); k++ {
		if k > 0 {
			if d := resultsDiff([][]*fsmpb.Result{results(t, a.Apply(log[k-1]))}, want[k-1:k], k-1); d != "" {
				t.Fatalf("one entry per Apply: %s", d)
			}
		}
		b, err := Open(t.TempDir(), nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if err := restoreBytes(b, snapshotBytes(t, a)); err != nil {
			t.Fatalf("k=%d: Restore: %v", k, err)
		}
		if d := stateDiff(t, b, a); d != "" {
			t.Fatalf("k=%d: restored state differs from the snapshotted one:\n%s", k, d)
		}
		if d := resultsDiff(applyIn(t, b, log[k:], randomSizes(r, len(log)-k)), want[k:], k); d != "" {
			t.Fatalf("k=%d: after restore, results differ: %s", k, d)
		}
		if d := stateDiff(t, b, gen.f); d != "" {
			t.Fatalf("k=%d: after restore and the rest of the log, state differs:\n%s", k, d)
		}
		b.Close()
	}
}

func TestFullLogCoverage(t *testing.T) {
	// The log must reach what it claims to: every command of dispatch
	// applied at least once, and every refusal reason.
	log, want, _ := fullLog(t)
	body := (&fsmpb.Command{}).ProtoReflect().Descriptor().Oneofs().ByName("body")
	applied, reasons := map[string]int{}, map[Reason]int{}
	for i, l := range log {
		cmds, _, _ := decodeEntry(l.Data)
		for j, r := range want[i] {
			reasons[ReasonOf(ResultError(r))]++
			if j < len(cmds) && r.Error == nil {
				if fd := cmds[j].ProtoReflect().WhichOneof(body); fd != nil {
					applied[string(fd.Name())]++
				}
			}
		}
	}
	t.Logf("%d entries; applied %v; reasons %v", len(log), applied, reasons)
	for i := range body.Fields().Len() {
		if name := string(body.Fields().Get(i).Name()); applied[name] == 0 {
			t.Errorf("the log never applies %s", name)
		}
	}
	for _, reason := range []Reason{ReasonNotFound, ReasonInvalidArgument, ReasonSeqMismatch, ReasonSessionStopped,
		ReasonAlreadyExists, ReasonStaleEpoch, ReasonLeaseNotHeld, ReasonLeaseHeld, ReasonAttachmentNotFound, ReasonBusy,
		ReasonNoPendingApproval, ReasonTurnOrder, ReasonBudgetExhausted, ReasonMoveState, ReasonDigestMismatch} {
		if reasons[reason] == 0 {
			t.Errorf("the log never produced %s", reason)
		}
	}
}
