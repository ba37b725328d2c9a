package fsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// ledgerLog writes a log through every ledger, budget and launch path:
// envelopes at create, charges and refusals, fresh, reset (and BUSY),
// clear and new (and their repeats), forks, launch bindings and every
// SessionStart source, SessionEnd, usage through a launch, request-id
// retries, and a leader-clock jump past the dedup window. Several commands
// share an entry, many of them on one lineage. Each entry is drawn against
// the state the log has produced so far (it is applied to gen as it is
// written): lineage i works on its launch's default session.
func ledgerLog(t *testing.T) (log []*raft.Log, want [][]*fsmpb.Result) {
	gen := newHarness(t)
	add := func(cmds ...*fsmpb.Command) {
		l := gen.entry(cmds...)
		want = append(want, results(t, gen.f.Apply(l)))
		log = append(log, l)
	}
	pol := func(i int) *fsmpb.Policy {
		return &fsmpb.Policy{Limits: &fsmpb.Budget{Turns: 50, SpendMicros: uint64(2000 + i)}, ContextCap: 3000,
			Priority: fmt.Sprint("p", i%3), Pace: "steady", QaEnvelope: "qa"}
	}
	// Each launch binds a session (the guard's, which becomes external);
	// beside each, a session the fleet runs takes the inputs and turns.
	const n = 6
	for i := range n {
		id, run := fmt.Sprintf("s%d", i), fmt.Sprintf("r%d", i)
		add(req("create-"+id, createPolicy(id, pol(i))),
			bindLaunch(fmt.Sprintf("L%d", i), []string{"claude", "codex", "gemini"}[i%3], id),
			createPolicy(run, pol(i)), attachCmd(run, "a1", "terminal", "tty", MaxTTL), takeLease(run, "a1", false, MaxTTL))
	}
	for round := range 12 {
		var cmds []*fsmpb.Command
		for i := range n {
			l, run := fmt.Sprintf("L%d", i), fmt.Sprintf("r%d", i)
			id := gen.launch(l).DefaultSession
			s, rs := gen.session(id), gen.session(run)
			pid := fmt.Sprintf("p%d-%d", i, round)
			if gen.attachment(id, "a1") == nil {
				cmds = append(cmds, attachCmd(id, "a1", "terminal", "tty", MaxTTL), takeLease(id, "a1", false, MaxTTL))
			}
			cmds = append(cmds,
				submitInput(id, "a1", s.Epoch, fmt.Sprint("in ", round)), // EXTERNAL_RUNTIME
				submitInput(run, "a1", rs.Epoch, fmt.Sprint("in ", round)),
				recordUsage(id, &fsmpb.Budget{Turns: 1, SpendMicros: 250, ToolCalls: 1}, 290),
				launchUsage(l, &fsmpb.Budget{Queries: 1, OutputTokens: 40}, 100),
			)
			var start []*fsmpb.EventInput
			if rs.TurnInputSeq == 0 {
				start = append(start, ev(KindTurnStarted, ""))
			}
			switch (round + i) % 6 {
			case 0:
				cmds = append(cmds, fresh(id, pid), runnerAppend(id, s.Epoch+1, ev(KindTurnStarted, "")),
					fresh(run, pid), runnerAppend(run, rs.Epoch+1, ev(KindTurnStarted, "")))
			case 1:
				cmds = append(cmds, runnerAppend(run, rs.Epoch, append(start, ev(KindOutput, "o"))...),
					reset(run, pid), // BUSY
					runnerAppend(run, rs.Epoch, ev(KindTurnCompleted, "")),
					reset(run, pid), reset(id, pid))
			case 2:
				cmds = append(cmds, hookStart(l, "startup", pid), hookStart(l, "startup", pid), hookStart(l, "resume", pid+"r"),
					runnerAppend(id, s.Epoch, ev(KindOutput, "stale"))) // the resume moved the epoch
			case 3:
				cmds = append(cmds, hookEnd(l, "clear", pid), hookStart(l, "clear", pid), hookStart(l, "clear", pid))
			case 4:
				cmds = append(cmds, forkCmd(id, uint64(3+round), fmt.Sprintf("f%d-%d", i, round), pid),
					withMetadata(hookStart(l, "compact", pid), `{"trigger":"auto"}`), hookStart(l, "fork", pid))
			case 5:
				cmds = append(cmds, req(fmt.Sprintf("clr-%d-%d", i, round), clearCmd(id, "new", StopUserNew, "", pid)),
					clearCmd(id, "new", StopUserNew, "", pid), hookStart(l, "bogus", pid),
					bindLaunch(l, "", ChildSessionID(id, pid)),
					spend(id, 1)) // the old session is stopped
			}
		}
		add(cmds...)
		if round == 3 || round == 7 {
			// retries under earlier request ids, with other bodies
			add(req("create-s1", create(fmt.Sprint("never-", round))),
				req(fmt.Sprintf("clr-%d-%d", 1, round-3), clearCmd("s1", "clear", "", "", "zzz")))
		}
		if round == 8 {
			add(at(gen.clock+DedupWindow+1, spend("s2", 1)), req("create-s3", createPolicy("reborn", pol(9))))
		}
	}
	return log, want
}

func TestLedgerDeterministic(t *testing.T) {
	// Replicas fed the same ledger log, grouped into ApplyBatch calls
	// differently, return the same results and end with the same content,
	// live and in their snapshots.
	log, want := ledgerLog(t)
	base, got := replayResults(t, log, 1)
	equalResults(t, got, want)
	wantDump := dump(t, base, true)
	for _, sizes := range [][]int{{1}, {len(log)}, {3}, {1, 4, 2, 9}} {
		t.Run(fmt.Sprint(sizes), func(t *testing.T) {
			a, ra := replayResults(t, log, sizes...)
			b, rb := replayResults(t, log, sizes...)
			equalResults(t, ra, want)
			equalResults(t, rb, want)
			if got := dump(t, a, true); got != wantDump {
				t.Fatalf("state differs from one entry per batch:\n%s", firstDiff(got, wantDump))
			}
			ca, cb := snapshotContent(t, snapshotBytes(t, a)), snapshotContent(t, snapshotBytes(t, b))
			if ca != cb {
				t.Fatalf("two replicas' snapshots differ:\n%s", firstDiff(ca, cb))
			}
			if ca != wantDump {
				t.Fatalf("snapshot differs from the live state:\n%s", firstDiff(ca, wantDump))
			}
		})
	}
}

func TestLedgerLogCoverage(t *testing.T) {
	// The ledger log must reach the paths it claims to.
	log, rs := ledgerLog(t)
	f, _ := replayResults(t, log, 1)
	reasons, actions := map[Reason]int{}, map[string]int{}
	for _, entry := range rs {
		for _, r := range entry {
			reasons[ReasonOf(ResultError(r))]++
			if b := r.GetBoundary(); b != nil {
				actions[b.Action]++
			}
		}
	}
	t.Logf("reasons %v, actions %v", reasons, actions)
	for _, reason := range []Reason{"", ReasonBusy, ReasonBudgetExhausted, ReasonInvalidArgument, ReasonSessionStopped, ReasonStaleEpoch, ReasonExternalRuntime} {
		if reasons[reason] == 0 {
			t.Errorf("ledger log never produced reason %q", reason)
		}
	}
	for _, action := range []string{"bound", "no_op", "fresh", "reset", "clear", "new", "fork", "resume", "compact", "end"} {
		if actions[action] == 0 {
			t.Errorf("ledger log never produced a %s boundary", action)
		}
	}
	if _, err := f.Session("reborn"); err != nil {
		t.Errorf("a create retried after the dedup window was not applied anew: %v", err)
	}
	for _, id := range []string{"never-3", "never-7"} {
		if _, err := f.Session(id); err == nil {
			t.Errorf("a retry inside the dedup window was applied (%s)", id)
		}
	}
}
