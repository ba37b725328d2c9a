package e2e

// Opt-in measurements on a fleet of real processes. They are skipped unless
// FAK_MEASURE=1, so `go test ./...` and CI never run them:
//
//	FAK_MEASURE=1 go test ./e2e -run TestMeasureFailover -v -count=1 -timeout 20m
//	FAK_MEASURE=1 FAK_MEASURE_DURATION=5m go test ./e2e -run TestMeasureSustainedLoad -v -count=1 -timeout 20m
//
// The fak and fakctl binaries are always built without -race (even when the
// test binary itself has -race): the race detector slows a process several
// times over and would make the figures meaningless.
//
// Environment:
//
//	FAK_MEASURE=1            run the measurements
//	FAK_MEASURE_OUT=PATH     also write a summary: PATH.md gets markdown,
//	                         any other PATH JSON; an existing directory gets
//	                         <TestName>.json and <TestName>.md
//	FAK_MEASURE_ROUNDS=N     failover rounds (default 10)
//	FAK_MEASURE_WRITERS=N    closed-loop writer goroutines (default 4)
//	FAK_MEASURE_PROBE=D      also start an append every D, open loop
//	                         (default 10ms)
//	FAK_MEASURE_DURATION=D   sustained load duration (default 5m)
//	FAK_MEASURE_WARMUP=D     calibration run before it (default 15s)

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

const (
	// measureCallTimeout bounds each append of the failover writers.
	measureCallTimeout = time.Second
	// recoveryTimeout: writes must be accepted again this soon after the
	// leader is killed.
	recoveryTimeout = 30 * time.Second
)

// requireMeasure skips the test unless FAK_MEASURE=1.
func requireMeasure(t *testing.T) {
	t.Helper()
	if os.Getenv("FAK_MEASURE") != "1" {
		t.Skip("opt-in measurement; set FAK_MEASURE=1 to run it")
	}
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 5m", name, v)
	}
	return d
}

// buildMeasureBinaries builds fak and fakctl like buildBinaries, but never
// with -race, whatever the test binary was built with.
func buildMeasureBinaries(t *testing.T) binaries {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(filepath.Separator),
		"github.com/fak-dev/fak/cmd/fak", "github.com/fak-dev/fak/cmd/fakctl"}
	start := time.Now()
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("built fak and fakctl in %s (race=false, for measurement)", time.Since(start).Round(time.Millisecond))
	exe := func(name string) string {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p + ".exe"); err == nil {
			p += ".exe"
		}
		return p
	}
	return binaries{fak: exe("fak"), fakctl: exe("fakctl")}
}

// failoverRound is the outcome of one round of TestMeasureFailover.
type failoverRound struct {
	Round      int     `json:"round"`
	Killed     string  `json:"killed"`
	KilledPID  int     `json:"killed_pid"`
	NewLeader  string  `json:"new_leader"`
	RecoveryMS float64 `json:"recovery_ms"` // kill → first ack of a call started after the kill
	// WriterRecoveryMS: the same, counting only the closed-loop writers.
	WriterRecoveryMS float64 `json:"writer_recovery_ms"`
	// ElectedMS: kill → both survivors name the new leader, which reports
	// itself Leader (polled every 10 ms; 0 if not seen).
	ElectedMS float64 `json:"elected_ms"`
	// InFlightAcked: calls already in flight at the kill that were
	// acknowledged afterwards (forwarded by a follower and retried).
	InFlightAcked int `json:"in_flight_acked"`
	// LastAckBeforeKillMS: how long before the kill the last ack arrived.
	LastAckBeforeKillMS float64        `json:"last_ack_before_kill_ms"`
	FirstAckThrough     string         `json:"first_ack_through"`
	FailedCalls         map[string]int `json:"failed_calls_until_recovery"`
	CatchUpMS           float64        `json:"restart_catch_up_ms"`
}

// TestMeasureFailover measures how long writes stop when the leader process
// is SIGKILLed: writers append continuously through the running nodes; the
// figure is the time from the kill to the first acknowledged append whose
// call started after the kill. The killed node is then restarted from its
// data dir and must catch up before the next round. At the end every
// acknowledged append must be in every node's journal.
func TestMeasureFailover(t *testing.T) {
	requireMeasure(t)
	rounds := envInt(t, "FAK_MEASURE_ROUNDS", 10)
	writers := envInt(t, "FAK_MEASURE_WRITERS", 4)
	probe := envDuration(t, "FAK_MEASURE_PROBE", 10*time.Millisecond)

	bins := buildMeasureBinaries(t)
	f := startFleet(t, bins, 3)
	clients := newAPIClients(f)
	leader, _ := clients.waitAgreedLeader(f, f.agents, leaderTimeout)
	t.Logf("fleet is up; leader %s", leader.name)

	createCtx, cancelCreate := context.WithTimeout(context.Background(), 10*time.Second)
	created, err := clients.of(leader).session.CreateSession(createCtx, connect.NewRequest(&fakv1.CreateSessionRequest{
		Title: "failover measurement", Objective: "measure write unavailability after a leader crash",
	}))
	cancelCreate()
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	sessionID := created.Msg.GetSession().GetSessionId()
	initialHead := created.Msg.GetSession().GetHeadSeq()
	if initialHead != 2 { // session.created, epoch.changed
		t.Fatalf("new session %s has head %d, want 2", sessionID, initialHead)
	}
	t.Logf("session %s (head %d); %d closed-loop writers and an open-loop call every %s, %s per-call timeout",
		sessionID, initialHead, writers, probe, measureCallTimeout)

	log := &appendLog{}
	writeCtx, stopWriters := context.WithCancel(context.Background())
	waitWriters := runWriters(writeCtx, f, clients, sessionID, writers, probe, log)
	writersStopped := false
	stop := func() {
		if !writersStopped {
			writersStopped = true
			stopWriters()
			waitWriters()
		}
	}
	defer stop()

	var results []failoverRound
	for round := 1; round <= rounds; round++ {
		roundStart := time.Now()
		_, roundIndex := log.since(0)
		// Writes must be flowing: enough acks this round, the latest recent.
		f.waitFor(30*time.Second, "writes to flow", func() (bool, string) {
			calls, _ := log.since(roundIndex)
			acks, last := 0, time.Time{}
			for _, c := range calls {
				if c.seq > 0 && c.start.After(roundStart) {
					acks++
					if c.end.After(last) {
						last = c.end
					}
				}
			}
			if acks < 50 || time.Since(roundStart) < time.Second || time.Since(last) > 100*time.Millisecond {
				return false, fmt.Sprintf("%d acks this round, last %s ago", acks, time.Since(last).Round(time.Millisecond))
			}
			return true, ""
		})

		leader, _ = clients.waitAgreedLeader(f, f.agents, leaderTimeout)
		r := failoverRound{Round: round, Killed: leader.name, KilledPID: leader.cmd.Process.Pid}
		// Calls recorded before this index ended before the kill.
		_, killIndex := log.since(0)
		killedAt := time.Now()
		leader.kill(t)
		killed := leader
		survivors := slices.DeleteFunc(slices.Clone(f.agents), func(a *agent) bool { return a == killed })

		// Meanwhile, note when both survivors first name the same new
		// leader and it reports itself Leader (Raft election done; it
		// still commits its barrier entry before serving writes).
		electedCh := make(chan time.Time, 1)
		electCtx, stopElectPoll := context.WithTimeout(context.Background(), recoveryTimeout)
		go func() {
			defer close(electedCh)
			for electCtx.Err() == nil {
				if l, _, _ := clients.agreedLeader(electCtx, survivors); l != nil {
					electedCh <- time.Now()
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()

		// Wait for the first ack of a call started after the kill.
		var recovered appendCall
		f.waitFor(recoveryTimeout, fmt.Sprintf("round %d: writes accepted after killing %s", round, killed.name), func() (bool, string) {
			calls, _ := log.since(killIndex)
			for _, c := range calls {
				if c.seq > 0 && !c.start.Before(killedAt) && (recovered.seq == 0 || c.end.Before(recovered.end)) {
					recovered = c
				}
			}
			return recovered.seq > 0, "no acknowledged append started after the kill yet"
		})
		// An ack is recorded just after its call ends, so a call that ended
		// a hair before `recovered` may have been missing from the snapshot:
		// let every call in flight finish, then look again.
		time.Sleep(measureCallTimeout + 100*time.Millisecond)
		failed := make(map[string]int)
		var lastBefore, writerRecovered appendCall
		inFlightAcked := 0
		calls, _ := log.since(roundIndex)
		for _, c := range calls {
			if c.seq > 0 && !c.start.Before(killedAt) && c.end.Before(recovered.end) {
				recovered = c
			}
			if c.seq > 0 && !c.probe && !c.start.Before(killedAt) && (writerRecovered.seq == 0 || c.end.Before(writerRecovered.end)) {
				writerRecovered = c
			}
		}
		stopElectPoll()
		electedAt := <-electedCh
		for _, c := range calls {
			switch {
			case c.seq > 0 && c.end.Before(killedAt):
				if c.end.After(lastBefore.end) {
					lastBefore = c
				}
			case c.seq > 0 && c.start.Before(killedAt):
				inFlightAcked++
			case c.seq == 0 && !c.end.Before(killedAt) && !c.start.After(recovered.end):
				via := "survivor"
				if c.node == killed.name {
					via = "killed node"
				}
				failed[c.failure+" via "+via]++
			}
		}
		r.RecoveryMS = millisSince(killedAt, recovered.end)
		r.WriterRecoveryMS = millisSince(killedAt, writerRecovered.end)
		r.ElectedMS = millisSince(killedAt, electedAt)
		r.InFlightAcked = inFlightAcked
		r.LastAckBeforeKillMS = millisSince(lastBefore.end, killedAt)
		r.FirstAckThrough = recovered.node
		r.FailedCalls = failed

		newLeader, _ := clients.waitAgreedLeader(f, survivors, leaderTimeout)
		r.NewLeader = newLeader.name
		t.Logf("round %2d: killed leader %s (pid %d); writes accepted again after %.1f ms (through %s; closed-loop writers only: %.1f ms); new leader %s seen by both survivors after %.1f ms; last ack %.1f ms before the kill; %d calls in flight at the kill acked later; failed calls meanwhile %v",
			round, killed.name, r.KilledPID, r.RecoveryMS, r.FirstAckThrough, r.WriterRecoveryMS, r.NewLeader, r.ElectedMS, r.LastAckBeforeKillMS, r.InFlightAcked, failed)

		// Restart the killed node from its data dir and wait until it has
		// caught up and all three agree on the leader.
		restartedAt := time.Now()
		killed.start(t)
		var target uint64
		maxAcked := maxAckedSeq(log.snapshot())
		f.waitFor(catchUpTimeout, fmt.Sprintf("round %d: restarted %s to catch up", round, killed.name), func() (bool, string) {
			leader, statuses, why := clients.agreedLeader(context.Background(), f.agents)
			if leader == nil {
				return false, why
			}
			if target == 0 {
				target = statuses[leader.name].GetCommitIndex()
			}
			if applied := statuses[killed.name].GetAppliedIndex(); applied < target {
				return false, fmt.Sprintf("%s applied %d of %d", killed.name, applied, target)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			resp, err := clients.of(killed).session.ReadEvents(ctx, connect.NewRequest(&fakv1.ReadEventsRequest{
				SessionId: sessionID, FromSeq: maxAcked, Limit: 1,
				Consistency: fakv1.ReadConsistency_READ_CONSISTENCY_STALE,
			}))
			if err != nil {
				return false, fmt.Sprintf("stale read on %s: %v", killed.name, err)
			}
			if resp.Msg.GetHeadSeq() < maxAcked {
				return false, fmt.Sprintf("%s has head %d, %d acknowledged", killed.name, resp.Msg.GetHeadSeq(), maxAcked)
			}
			return true, ""
		})
		r.CatchUpMS = millisSince(restartedAt, time.Now())
		t.Logf("round %2d: restarted %s caught up in %.0f ms", round, killed.name, r.CatchUpMS)
		results = append(results, r)
	}

	stop()
	calls := log.snapshot()
	leader, _ = clients.waitAgreedLeader(f, f.agents, leaderTimeout)
	verifyJournals(t, f, clients, sessionID, initialHead, calls)

	var recoveries, writerRecoveries, elections []float64
	for _, r := range results {
		recoveries = append(recoveries, r.RecoveryMS)
		writerRecoveries = append(writerRecoveries, r.WriterRecoveryMS)
		elections = append(elections, r.ElectedMS)
	}
	st := summarize(recoveries)
	wst := summarize(writerRecoveries)
	est := summarize(elections)
	acked, failedTotal := 0, 0
	for _, c := range calls {
		if c.seq > 0 {
			acked++
		} else if c.failure != "stopped" {
			failedTotal++
		}
	}
	t.Logf("failover over %d rounds: writes accepted again after median %.1f ms, min %.1f ms, max %.1f ms (mean %.1f ms)",
		len(results), st.Median, st.Min, st.Max, st.Mean)
	t.Logf("closed-loop writers only: median %.1f ms, min %.1f ms, max %.1f ms", wst.Median, wst.Min, wst.Max)
	t.Logf("new leader agreed by the survivors: median %.1f ms, min %.1f ms, max %.1f ms", est.Median, est.Min, est.Max)
	t.Logf("%d calls: %d acknowledged, %d failed", len(calls), acked, failedTotal)

	summary := map[string]any{
		"test":               "TestMeasureFailover",
		"date":               time.Now().UTC().Format(time.RFC3339),
		"writers":            writers,
		"call_timeout_ms":    millis(measureCallTimeout),
		"rounds":             results,
		"recovery_ms":        st,
		"writer_recovery_ms": wst,
		"elected_ms":         est,
		"probe_interval_ms":  millis(probe),
		"calls":              len(calls),
		"acknowledged":       acked,
		"failed":             failedTotal,
		"final_leader":       leader.name,
		"all_acks_present":   !t.Failed(),
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Failover: writes accepted again after SIGKILL of the leader\n\n")
	fmt.Fprintf(&md, "%d closed-loop writers plus an open-loop call every %s, one event per call, %s per-call timeout, non-race binaries.\n\n", writers, probe, measureCallTimeout)
	fmt.Fprintf(&md, "| round | killed | new leader | leader agreed (ms) | writes accepted (ms) | closed-loop only (ms) | first ack through | catch-up after restart (ms) |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&md, "| %d | %s | %s | %.1f | %.1f | %.1f | %s | %.0f |\n", r.Round, r.Killed, r.NewLeader, r.ElectedMS, r.RecoveryMS, r.WriterRecoveryMS, r.FirstAckThrough, r.CatchUpMS)
	}
	fmt.Fprintf(&md, "\nWrites accepted again: median %.1f ms, min %.1f ms, max %.1f ms, mean %.1f ms.\n", st.Median, st.Min, st.Max, st.Mean)
	fmt.Fprintf(&md, "Closed-loop writers only: median %.1f ms, min %.1f ms, max %.1f ms.\n", wst.Median, wst.Min, wst.Max)
	fmt.Fprintf(&md, "Leader agreed by the survivors: median %.1f ms, min %.1f ms, max %.1f ms.\n\n", est.Median, est.Min, est.Max)
	fmt.Fprintf(&md, "%d calls, %d acknowledged, %d failed; every acknowledged append present on every node: %v.\n", len(calls), acked, failedTotal, !t.Failed())
	writeMeasureOutput(t, summary, md.String())
}
