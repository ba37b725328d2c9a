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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
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

// apiClient talks to one agent through the Connect Go client.
type apiClient struct {
	session fakv1connect.SessionServiceClient
	cluster fakv1connect.ClusterServiceClient
}

// apiClients holds one apiClient per agent, sharing one h2c HTTP client.
type apiClients struct {
	httpClient *http.Client
	byName     map[string]apiClient
}

func newAPIClients(f *fleet) *apiClients {
	transport := &http.Transport{IdleConnTimeout: 90 * time.Second}
	transport.Protocols = new(http.Protocols)
	transport.Protocols.SetUnencryptedHTTP2(true)
	c := &apiClients{httpClient: &http.Client{Transport: transport}, byName: make(map[string]apiClient)}
	token := f.token
	auth := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+token)
			return next(ctx, req)
		}
	}))
	for _, a := range f.agents {
		base := "http://" + a.apiAddr
		c.byName[a.name] = apiClient{
			session: fakv1connect.NewSessionServiceClient(c.httpClient, base, auth),
			cluster: fakv1connect.NewClusterServiceClient(c.httpClient, base, auth),
		}
	}
	f.t.Cleanup(transport.CloseIdleConnections)
	return c
}

func (c *apiClients) of(a *agent) apiClient { return c.byName[a.name] }

// nodeStatus asks agent a for its own Raft status.
func (c *apiClients) nodeStatus(ctx context.Context, a *agent) (*fakv1.NodeStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := c.of(a).cluster.Status(ctx, connect.NewRequest(&fakv1.StatusRequest{}))
	if err != nil {
		return nil, err
	}
	if len(resp.Msg.GetNodes()) != 1 {
		return nil, fmt.Errorf("%s: status of %d nodes", a.name, len(resp.Msg.GetNodes()))
	}
	return resp.Msg.GetNodes()[0], nil
}

// statusAll asks agent a for the status of every member (all = true).
func (c *apiClients) statusAll(ctx context.Context, a *agent) (*fakv1.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := c.of(a).cluster.Status(ctx, connect.NewRequest(&fakv1.StatusRequest{All: true}))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// agreedLeader asks every agent in among for its own status and returns the
// leader all of them name (one of among, reporting itself Leader), together
// with each agent's status.
func (c *apiClients) agreedLeader(ctx context.Context, among []*agent) (leader *agent, statuses map[string]*fakv1.NodeStatus, why string) {
	statuses = make(map[string]*fakv1.NodeStatus)
	leaderID := ""
	for _, a := range among {
		st, err := c.nodeStatus(ctx, a)
		if err != nil {
			return nil, statuses, fmt.Sprintf("status of %s: %v", a.name, err)
		}
		statuses[a.name] = st
		switch {
		case st.GetLeaderId() == "":
			return nil, statuses, a.name + " knows no leader"
		case leaderID == "":
			leaderID = st.GetLeaderId()
		case st.GetLeaderId() != leaderID:
			return nil, statuses, fmt.Sprintf("leaders disagree: %s and %s", leaderID, st.GetLeaderId())
		}
	}
	for _, a := range among {
		if a.name == leaderID {
			if statuses[a.name].GetRaftState() != "Leader" {
				return nil, statuses, fmt.Sprintf("%s is named leader but is %s", leaderID, statuses[a.name].GetRaftState())
			}
			return a, statuses, ""
		}
	}
	return nil, statuses, fmt.Sprintf("leader %q is not among the expected nodes", leaderID)
}

// waitAgreedLeader waits until every agent in among names the same leader.
func (c *apiClients) waitAgreedLeader(f *fleet, among []*agent, timeout time.Duration) (*agent, map[string]*fakv1.NodeStatus) {
	f.t.Helper()
	var leader *agent
	var statuses map[string]*fakv1.NodeStatus
	f.waitFor(timeout, "a leader agreed on by all running nodes", func() (bool, string) {
		var why string
		leader, statuses, why = c.agreedLeader(context.Background(), among)
		return leader != nil, why
	})
	return leader, statuses
}

// ----- failover -----------------------------------------------------------

// appendCall is one AppendEvents call made by a failover writer.
type appendCall struct {
	requestID  string // also the event's text
	node       string
	start, end time.Time
	seq        uint64 // acknowledged seq; 0 when the call failed
	failure    string // reason or code of a failed call
	probe      bool   // made by the open-loop prober, not a writer
}

// appendLog collects every call of the writers.
type appendLog struct {
	mu    sync.Mutex
	calls []appendCall
}

func (l *appendLog) add(c appendCall) {
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
}

func (l *appendLog) snapshot() []appendCall { calls, _ := l.since(0); return calls }

// since returns a copy of the calls recorded from index i on, and the
// number of calls recorded so far.
func (l *appendLog) since(i int) ([]appendCall, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls[i:]), len(l.calls)
}

// failureReason is a short label for a failed call: the fak ErrorInfo
// reason when there is one, else the Connect code.
func failureReason(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err.Error()
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*fakv1.ErrorInfo); ok && info.GetReason() != "" {
				return info.GetReason()
			}
		}
	}
	return ce.Code().String()
}

// appendOnce appends one event, with request id and text id, through
// agent a with a timeout of measureCallTimeout, and records the call.
func appendOnce(ctx context.Context, clients *apiClients, sessionID, id string, a *agent, probe bool, log *appendLog) appendCall {
	callCtx, cancel := context.WithTimeout(ctx, measureCallTimeout)
	start := time.Now()
	resp, err := clients.of(a).session.AppendEvents(callCtx, connect.NewRequest(&fakv1.AppendEventsRequest{
		SessionId: sessionID,
		Events:    []*fakv1.EventInput{{Kind: "note", Text: id}}, // the kind clients append; no runner reacts
		RequestId: id,
	}))
	end := time.Now()
	cancel()
	c := appendCall{requestID: id, node: a.name, start: start, end: end, probe: probe}
	switch {
	case err == nil:
		c.seq = resp.Msg.GetFirstSeq()
		if resp.Msg.GetLastSeq() != c.seq || c.seq == 0 {
			c.failure = fmt.Sprintf("bad ack: seqs %d-%d", resp.Msg.GetFirstSeq(), resp.Msg.GetLastSeq())
		}
	case ctx.Err() != nil:
		// Cancelled by the test: the outcome is unknown, which the final
		// check tolerates (the call is not acknowledged).
		c.failure = "stopped"
	default:
		c.failure = failureReason(err)
	}
	log.add(c)
	return c
}

// runWriters starts n goroutines that append to sessionID one event per
// call until ctx ends, each call with its own request id and a timeout of
// measureCallTimeout, rotating over the agents whose process is running.
//
// Closed-loop writers alone measure recovery coarsely: the calls they start
// right after the kill wait inside a follower, whose forwarding retries back
// off to 200 ms, or time out after 1 s; so the first ack lands on that retry
// schedule. An open-loop prober therefore also starts a call every probe
// interval (if probe > 0), so some call starts just after the new leader is
// ready.
func runWriters(ctx context.Context, f *fleet, clients *apiClients, sessionID string, n int, probe time.Duration, log *appendLog) (wait func()) {
	var wg sync.WaitGroup
	runID := time.Now().UnixNano()
	pick := func(i int) *agent {
		running := f.running()
		if len(running) == 0 {
			return nil
		}
		return running[i%len(running)]
	}
	for w := range n {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				a := pick(i + w)
				if a == nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				c := appendOnce(ctx, clients, sessionID, fmt.Sprintf("m%d-w%d-%d", runID, w, i), a, false, log)
				// A node refusing connections fails at once: do not spin.
				if c.seq == 0 && c.end.Sub(c.start) < 5*time.Millisecond {
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	if probe > 0 {
		wg.Go(func() {
			var calls sync.WaitGroup
			defer calls.Wait()
			ticker := time.NewTicker(probe)
			defer ticker.Stop()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-ticker.C:
				}
				if a := pick(i); a != nil {
					id := fmt.Sprintf("m%d-p-%d", runID, i)
					calls.Go(func() { appendOnce(ctx, clients, sessionID, id, a, true, log) })
				}
			}
		})
	}
	return wg.Wait
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

func millisSince(from, to time.Time) float64 {
	if from.IsZero() || to.IsZero() {
		return 0
	}
	return float64(to.Sub(from)) / float64(time.Millisecond)
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func maxAckedSeq(calls []appendCall) uint64 {
	var m uint64
	for _, c := range calls {
		m = max(m, c.seq)
	}
	return m
}

// stats summarizes a list of figures.
type stats struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
}

func summarize(values []float64) stats {
	if len(values) == 0 {
		return stats{}
	}
	s := slices.Clone(values)
	sort.Float64s(s)
	st := stats{N: len(s), Min: s[0], Max: s[len(s)-1]}
	if len(s)%2 == 1 {
		st.Median = s[len(s)/2]
	} else {
		st.Median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	for _, v := range s {
		st.Mean += v
	}
	st.Mean /= float64(len(s))
	return st
}

// readJournal reads a session's whole journal through agent a with a
// linearizable read, page by page.
func readJournal(clients *apiClients, a *agent, sessionID string) ([]*fakv1.Event, error) {
	var events []*fakv1.Event
	from := uint64(1)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := clients.of(a).session.ReadEvents(ctx, connect.NewRequest(&fakv1.ReadEventsRequest{
			SessionId: sessionID, FromSeq: from, Limit: 1000,
		}))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("read from seq %d on %s: %w", from, a.name, err)
		}
		page := resp.Msg.GetEvents()
		events = append(events, page...)
		if len(page) == 0 || page[len(page)-1].GetSeq() >= resp.Msg.GetHeadSeq() {
			if uint64(len(events)) != resp.Msg.GetHeadSeq() {
				return events, fmt.Errorf("%s: read %d events, head %d", a.name, len(events), resp.Msg.GetHeadSeq())
			}
			return events, nil
		}
		from = page[len(page)-1].GetSeq() + 1
	}
}

// verifyJournals checks on every node that the journal is gap-free, holds
// each request id at most once, and has every acknowledged append at its
// acknowledged seq; and that all nodes hold the same journal.
func verifyJournals(t *testing.T, f *fleet, clients *apiClients, sessionID string, initialHead uint64, calls []appendCall) {
	t.Helper()
	bySeq := make(map[uint64]appendCall)
	sent := make(map[string]bool)
	for _, c := range calls {
		sent[c.requestID] = true
		if c.seq == 0 {
			continue
		}
		if c.failure != "" {
			t.Errorf("call %s: %s", c.requestID, c.failure)
		}
		if prev, dup := bySeq[c.seq]; dup {
			t.Errorf("seq %d acknowledged twice: to %s and %s", c.seq, prev.requestID, c.requestID)
		}
		bySeq[c.seq] = c
	}
	var reference []*fakv1.Event
	var refName string
	for _, a := range f.agents {
		events, err := readJournal(clients, a, sessionID)
		if err != nil {
			t.Errorf("journal on %s: %v", a.name, err)
			continue
		}
		seen := make(map[string]uint64)
		lost, unacked, problems := 0, 0, 0
		for i, ev := range events {
			if ev.GetSeq() != uint64(i+1) {
				t.Errorf("%s: event %d has seq %d", a.name, i+1, ev.GetSeq())
				problems++
				break
			}
			rid := ev.GetRequestId()
			if ev.GetSeq() <= initialHead {
				continue
			}
			if prev, dup := seen[rid]; dup {
				t.Errorf("%s: request id %s at seqs %d and %d", a.name, rid, prev, ev.GetSeq())
				problems++
			}
			seen[rid] = ev.GetSeq()
			if !sent[rid] || ev.GetText() != rid {
				t.Errorf("%s: seq %d is an event nobody sent: request id %q text %q", a.name, ev.GetSeq(), rid, ev.GetText())
				problems++
			}
			if _, ok := bySeq[ev.GetSeq()]; !ok {
				unacked++
			}
		}
		for seq, c := range bySeq {
			if seq > uint64(len(events)) {
				lost++
				t.Errorf("%s: acknowledged seq %d (%s through %s) is missing", a.name, seq, c.requestID, c.node)
				continue
			}
			if ev := events[seq-1]; ev.GetRequestId() != c.requestID {
				lost++
				t.Errorf("%s: acknowledged seq %d is %s, but was acknowledged to %s through %s", a.name, seq, ev.GetRequestId(), c.requestID, c.node)
			}
		}
		t.Logf("%s: journal of %d events; %d acknowledged appends, %d lost; %d committed without an ack (failed or timed-out calls); %d other problems",
			a.name, len(events), len(bySeq), lost, unacked, problems)
		if reference == nil {
			reference, refName = events, a.name
			continue
		}
		if len(events) != len(reference) {
			t.Errorf("%s holds %d events, %s %d", a.name, len(events), refName, len(reference))
		}
		for i := range min(len(events), len(reference)) {
			if events[i].GetRequestId() != reference[i].GetRequestId() {
				t.Errorf("%s differs from %s at seq %d", a.name, refName, i+1)
				break
			}
		}
	}
}

// writeMeasureOutput writes the summary to FAK_MEASURE_OUT, if set.
func writeMeasureOutput(t *testing.T, summary any, markdown string) {
	t.Helper()
	path := os.Getenv("FAK_MEASURE_OUT")
	if path == "" {
		return
	}
	js, err := json.MarshalIndent(summary, "", "  ")
	if err != nil {
		t.Errorf("summary: %v", err)
		return
	}
	js = append(js, '\n')
	write := func(p string, data []byte) {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Errorf("write summary: %v", err)
			return
		}
		t.Logf("summary written to %s", p)
	}
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		write(filepath.Join(path, t.Name()+".json"), js)
		write(filepath.Join(path, t.Name()+".md"), []byte(markdown))
		return
	}
	if strings.HasSuffix(path, ".md") {
		write(path, []byte(markdown))
		return
	}
	write(path, js)
}

// ----- sustained load -----------------------------------------------------

// benchResult is `fakctl bench append -o json` output.
type benchResult struct {
	Events          int64   `json:"events"`
	Calls           int64   `json:"calls"`
	Errors          int64   `json:"errors"`
	ElapsedSeconds  float64 `json:"elapsed_seconds"`
	EventsPerSecond float64 `json:"events_per_second"`
	CallsPerSecond  float64 `json:"calls_per_second"`
	LatencyMillis   struct {
		P50  float64 `json:"p50"`
		P90  float64 `json:"p90"`
		P99  float64 `json:"p99"`
		P999 float64 `json:"p99_9"`
		Max  float64 `json:"max"`
	} `json:"latency_ms"`
	ErrorSamples []string `json:"error_samples,omitempty"`
	Interrupted  bool     `json:"interrupted,omitempty"`

	exitCode int
	stderr   string
	started  time.Time // when fakctl started
}

// runBench runs `fakctl bench append` against agent a and interrupts it
// with SIGINT after d (fakctl then prints a partial summary and exits 1
// with "interrupted"), unless it finishes total first.
func runBench(t *testing.T, f *fleet, a *agent, total int64, d time.Duration) benchResult {
	t.Helper()
	args := []string{"--addr", "http://" + a.apiAddr, "--token", f.token,
		"bench", "append", "--sessions", "100", "--clients", "64",
		"--total", strconv.FormatInt(total, 10), "--size", "256", "-o", "json"}
	cmd := exec.Command(f.bins.fakctl, args...)
	cmd.Env = fakctlEnv()
	cmd.Dir = t.TempDir()
	var stdout bytes.Buffer
	stderrPath := filepath.Join(cmd.Dir, "stderr")
	stderrFile, err := os.Create(stderrPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = &stdout, stderrFile
	killWithParent(cmd)
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start fakctl bench: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-exited:
	case <-time.After(d):
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Logf("interrupt fakctl bench: %v; killing it", err)
			_ = cmd.Process.Kill()
		}
		select {
		case waitErr = <-exited:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			waitErr = <-exited
		}
	}
	stderrFile.Close()
	stderr, _ := os.ReadFile(stderrPath)
	r := benchResult{stderr: string(stderr), started: started}
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &exitErr):
		r.exitCode = exitErr.ExitCode()
	default:
		t.Fatalf("fakctl bench: %v", waitErr)
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("fakctl %s: exit %d, unreadable output %q: %v\nstderr: %s",
			strings.Join(args, " "), r.exitCode, stdout.String(), err, stderr)
	}
	return r
}

// progressRates turns bench progress lines ("[ 12s] 123/456 events  10 ev/s
// errors 0") into per-second event counts.
func progressRates(stderr string) []int64 {
	var rates []int64
	var prev int64
	for line := range strings.Lines(stderr) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "[")
		if !ok {
			continue
		}
		_, rest, ok = strings.Cut(rest, "] ")
		if !ok {
			continue
		}
		done, _, ok := strings.Cut(strings.TrimSpace(rest), "/")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(done, 10, 64)
		if err != nil {
			continue
		}
		rates = append(rates, n-prev)
		prev = n
	}
	return rates
}

// appendPhaseStart estimates when the bench's append phase (and its
// progress clock) started: after "Created N sessions in D".
func appendPhaseStart(r benchResult) time.Time {
	for line := range strings.Lines(r.stderr) {
		if rest, ok := strings.CutPrefix(line, "Created "); ok {
			if _, d, ok := strings.Cut(strings.TrimSpace(rest), " sessions in "); ok {
				if dur, err := time.ParseDuration(d); err == nil {
					return r.started.Add(dur)
				}
			}
		}
	}
	return r.started
}

// storageEvent is a change seen on disk in an agent's data dir.
type storageEvent struct {
	At   time.Time `json:"at"`
	Node string    `json:"node"`
	What string    `json:"what"`
}

// watchStorage polls every agent's data dir and records Raft snapshots
// starting (a .tmp dir appears) and finishing, and growth of the FSM and
// Raft log databases (bbolt remaps its file as it grows), so that stalls
// can be lined up with them.
func watchStorage(f *fleet, every time.Duration) (stop func() []storageEvent) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var events []storageEvent
	go func() {
		defer close(done)
		seen := make(map[string]bool)
		sizes := make(map[string]int64)
		for first := true; ; first = false {
			now := time.Now()
			for _, a := range f.agents {
				entries, _ := os.ReadDir(filepath.Join(a.dataDir, "raft", "snapshots"))
				for _, e := range entries {
					key := a.name + "/" + e.Name()
					if !seen[key] {
						seen[key] = true
						if !first {
							what := "snapshot finished: " + e.Name()
							if strings.HasSuffix(e.Name(), ".tmp") {
								what = "snapshot started: " + e.Name()
							}
							events = append(events, storageEvent{At: now, Node: a.name, What: what})
						}
					}
				}
				for _, db := range []string{"fsm.db", filepath.Join("raft", "raft.db")} {
					info, err := os.Stat(filepath.Join(a.dataDir, db))
					if err != nil {
						continue
					}
					key := a.name + "/" + db
					if old, ok := sizes[key]; ok && info.Size() != old {
						events = append(events, storageEvent{At: now, Node: a.name,
							What: fmt.Sprintf("%s %d -> %d MiB", filepath.Base(db), old>>20, info.Size()>>20)})
					}
					sizes[key] = info.Size()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(every):
			}
		}
	}()
	return func() []storageEvent {
		cancel()
		<-done
		return events
	}
}

// electionMarks counts, in an agent's log, lines that show an election or
// an attempt at one.
var electionMarkers = []string{"heartbeat timeout reached", "Election timeout reached", "failed to contact", "stepping down"}

func electionMarks(f *fleet) map[string]int {
	out := make(map[string]int)
	for _, a := range f.agents {
		text := a.logText()
		for _, m := range electionMarkers {
			if n := strings.Count(text, m); n > 0 {
				out[a.name+": "+m] += n
			}
		}
	}
	return out
}

// TestMeasureSustainedLoad runs `fakctl bench append` against the leader of
// a three-process fleet for FAK_MEASURE_DURATION and reports throughput and
// latency; it fails if any election happened meanwhile (a term or the
// leader changed).
func TestMeasureSustainedLoad(t *testing.T) {
	requireMeasure(t)
	duration := envDuration(t, "FAK_MEASURE_DURATION", 5*time.Minute)
	warmup := envDuration(t, "FAK_MEASURE_WARMUP", 15*time.Second)

	bins := buildMeasureBinaries(t)
	f := startFleet(t, bins, 3)
	clients := newAPIClients(f)
	leader, _ := clients.waitAgreedLeader(f, f.agents, leaderTimeout)
	t.Logf("fleet is up; leader %s", leader.name)

	// Calibrate: bench preallocates a latency slot per call of --total, so
	// the main run gets a total sized from the warm-up rate instead of a
	// huge one.
	warm := runBench(t, f, leader, 5_000_000, warmup)
	t.Logf("warm-up (%s): %.0f events/s, p50 %.2f ms, p99 %.2f ms, errors %d",
		warmup, warm.EventsPerSecond, warm.LatencyMillis.P50, warm.LatencyMillis.P99, warm.Errors)
	if warm.Errors > 0 || warm.EventsPerSecond <= 0 {
		t.Fatalf("warm-up failed: exit %d, %+v\nstderr: %s", warm.exitCode, warm, warm.stderr)
	}
	total := int64(warm.EventsPerSecond*duration.Seconds()*2) + 100_000

	leader, _ = clients.waitAgreedLeader(f, f.agents, leaderTimeout)
	before, err := clients.statusAll(context.Background(), leader)
	if err != nil {
		t.Fatalf("status before: %v", err)
	}
	terms := func(st *fakv1.StatusResponse) map[string]string {
		out := make(map[string]string)
		for _, n := range st.GetNodes() {
			out[n.GetName()] = fmt.Sprintf("term %d %s leader=%s%s", n.GetTerm(), n.GetRaftState(), n.GetLeaderId(), n.GetError())
		}
		return out
	}
	t.Logf("before: %v", terms(before))
	marksBefore := electionMarks(f)

	// Watch terms and leaders every 2s during the run, to catch an election
	// that ends with the same leader.
	type observation struct {
		terms   map[string]uint64
		leaders map[string]bool
		errs    []string
	}
	obs := observation{terms: make(map[string]uint64), leaders: make(map[string]bool)}
	for _, n := range before.GetNodes() {
		obs.terms[n.GetName()] = n.GetTerm()
		obs.leaders[n.GetLeaderId()] = true
	}
	var obsMu sync.Mutex
	termChanges := []string{}
	monitorCtx, stopMonitor := context.WithCancel(context.Background())
	monitorDone := make(chan struct{})
	go func() {
		defer close(monitorDone)
		ticker := time.NewTicker(2 * time.Second)
		defer ticker.Stop()
		for {
			select {
			case <-monitorCtx.Done():
				return
			case <-ticker.C:
			}
			for _, a := range f.agents {
				st, err := clients.nodeStatus(monitorCtx, a)
				obsMu.Lock()
				if err != nil {
					if monitorCtx.Err() == nil {
						obs.errs = append(obs.errs, fmt.Sprintf("%s: %v", a.name, err))
					}
				} else {
					if st.GetTerm() != obs.terms[a.name] {
						termChanges = append(termChanges, fmt.Sprintf("%s %s: term %d -> %d (%s, leader %s)",
							time.Now().UTC().Format("15:04:05.000"), a.name, obs.terms[a.name], st.GetTerm(), st.GetRaftState(), st.GetLeaderId()))
						obs.terms[a.name] = st.GetTerm()
					}
					obs.leaders[st.GetLeaderId()] = true
				}
				obsMu.Unlock()
			}
		}
	}()

	t.Logf("running fakctl bench append --sessions 100 --clients 64 --total %d --size 256 against %s for %s", total, leader.name, duration)
	stopStorage := watchStorage(f, 250*time.Millisecond)
	res := runBench(t, f, leader, total, duration)
	storage := stopStorage()
	stopMonitor()
	<-monitorDone
	f.checkAlive()

	after, err := clients.statusAll(context.Background(), leader)
	if err != nil {
		t.Fatalf("status after: %v", err)
	}
	t.Logf("after:  %v", terms(after))
	marksAfter := electionMarks(f)
	newMarks := make(map[string]int)
	for k, v := range marksAfter {
		if d := v - marksBefore[k]; d > 0 {
			newMarks[k] = d
		}
	}

	var elections []string
	beforeByName := make(map[string]*fakv1.NodeStatus)
	for _, n := range before.GetNodes() {
		beforeByName[n.GetName()] = n
	}
	for _, n := range after.GetNodes() {
		b := beforeByName[n.GetName()]
		switch {
		case n.GetError() != "":
			elections = append(elections, fmt.Sprintf("%s unreachable after the run: %s", n.GetName(), n.GetError()))
		case b == nil:
			elections = append(elections, fmt.Sprintf("%s was not in the status before the run", n.GetName()))
		case n.GetTerm() != b.GetTerm():
			elections = append(elections, fmt.Sprintf("%s: term %d -> %d", n.GetName(), b.GetTerm(), n.GetTerm()))
		case n.GetLeaderId() != b.GetLeaderId():
			elections = append(elections, fmt.Sprintf("%s: leader %s -> %s", n.GetName(), b.GetLeaderId(), n.GetLeaderId()))
		}
	}
	obsMu.Lock()
	elections = append(elections, termChanges...)
	var leadersSeen []string
	for l := range obs.leaders {
		leadersSeen = append(leadersSeen, l)
	}
	monitorErrs := obs.errs
	obsMu.Unlock()
	sort.Strings(leadersSeen)
	if len(leadersSeen) != 1 {
		elections = append(elections, fmt.Sprintf("leaders seen during the run: %q", leadersSeen))
	}

	rates := progressRates(res.stderr)
	var minRate, maxRate int64 = -1, 0
	zeroSeconds := 0
	for i, r := range rates {
		if i == 0 || i == len(rates)-1 {
			continue // partial seconds
		}
		if minRate < 0 || r < minRate {
			minRate = r
		}
		maxRate = max(maxRate, r)
		if r == 0 {
			zeroSeconds++
		}
	}

	t.Logf("sustained load for %.1f s against %s (exit %d, interrupted %v): %d events in %d calls, %d errors",
		res.ElapsedSeconds, leader.name, res.exitCode, res.Interrupted, res.Events, res.Calls, res.Errors)
	t.Logf("throughput %.0f events/s; latency p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms",
		res.EventsPerSecond, res.LatencyMillis.P50, res.LatencyMillis.P90, res.LatencyMillis.P99, res.LatencyMillis.P999, res.LatencyMillis.Max)
	t.Logf("per-second throughput (from progress lines): min %d, max %d events/s; %d seconds with no event", minRate, maxRate, zeroSeconds)
	// Line stalls (a second with under a quarter of the median rate) up
	// with what happened on disk around then.
	appendStart := appendPhaseStart(res)
	inner := rates
	if len(inner) > 2 {
		inner = inner[1 : len(inner)-1]
	}
	sortedRates := slices.Clone(inner)
	slices.Sort(sortedRates)
	var medianRate int64
	if len(sortedRates) > 0 {
		medianRate = sortedRates[len(sortedRates)/2]
	}
	var stalls []string
	for i, r := range rates {
		if i == 0 || i == len(rates)-1 || r*4 >= medianRate {
			continue
		}
		// Progress line i covers seconds (i, i+1] of the append phase.
		from, to := appendStart.Add(time.Duration(i)*time.Second), appendStart.Add(time.Duration(i+1)*time.Second)
		var near []string
		for _, e := range storage {
			if e.At.After(from.Add(-3*time.Second)) && e.At.Before(to.Add(3*time.Second)) {
				near = append(near, fmt.Sprintf("%+.2fs %s %s", e.At.Sub(from).Seconds(), e.Node, e.What))
			}
		}
		stalls = append(stalls, fmt.Sprintf("second %d: %d events (median %d); on disk within 3 s: %s", i+1, r, medianRate, strings.Join(near, "; ")))
	}
	t.Logf("per-second throughput: median %d events/s; %d seconds under a quarter of it", medianRate, len(stalls))
	for _, st := range stalls {
		t.Logf("  stall at %s", st)
	}
	var storageLines []string
	for _, e := range storage {
		storageLines = append(storageLines, fmt.Sprintf("%7.2fs %s %s", e.At.Sub(appendStart).Seconds(), e.Node, e.What))
	}
	t.Logf("on disk during the run (seconds since the append phase started):\n  %s", strings.Join(storageLines, "\n  "))
	t.Logf("election-related log lines during the run: %v", newMarks)
	if len(monitorErrs) > 0 {
		t.Logf("status polls that failed during the run: %d, first: %s", len(monitorErrs), monitorErrs[0])
	}
	if len(elections) > 0 {
		t.Errorf("elections happened during the run:\n  %s", strings.Join(elections, "\n  "))
	} else {
		t.Logf("no election: every node kept its term and leader %s", leader.name)
	}
	if res.Errors > 0 {
		t.Errorf("%d of %d calls failed: %q", res.Errors, res.Calls, res.ErrorSamples)
	}
	if !res.Interrupted {
		t.Logf("note: the bench finished its --total before %s", duration)
	}

	summary := map[string]any{
		"test":                  "TestMeasureSustainedLoad",
		"date":                  time.Now().UTC().Format(time.RFC3339),
		"duration":              duration.String(),
		"leader":                leader.name,
		"bench":                 res,
		"bench_exit_code":       res.exitCode,
		"per_second_min_events": minRate,
		"per_second_max_events": maxRate,
		"seconds_without_event": zeroSeconds,
		"per_second_events":     rates,
		"stalls":                stalls,
		"storage_events":        storageLines,
		"terms_before":          terms(before),
		"terms_after":           terms(after),
		"elections":             elections,
		"election_log_lines":    newMarks,
		"warmup":                warm,
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Sustained load: fakctl bench append --sessions 100 --clients 64 --size 256\n\n")
	fmt.Fprintf(&md, "| metric | value |\n|---|---|\n")
	fmt.Fprintf(&md, "| duration | %.1f s |\n| events | %d |\n| errors | %d |\n| events/s | %.0f |\n", res.ElapsedSeconds, res.Events, res.Errors, res.EventsPerSecond)
	fmt.Fprintf(&md, "| p50 | %.2f ms |\n| p99 | %.2f ms |\n| p99.9 | %.2f ms |\n| max | %.2f ms |\n", res.LatencyMillis.P50, res.LatencyMillis.P99, res.LatencyMillis.P999, res.LatencyMillis.Max)
	fmt.Fprintf(&md, "| per-second events/s min–median–max | %d–%d–%d |\n| seconds under 1/4 of the median | %d |\n| elections | %d |\n", minRate, medianRate, maxRate, len(stalls), len(elections))
	if len(stalls) > 0 {
		fmt.Fprintf(&md, "\nStalls:\n\n- %s\n", strings.Join(stalls, "\n- "))
	}
	if len(elections) > 0 {
		fmt.Fprintf(&md, "\nElections:\n\n- %s\n", strings.Join(elections, "\n- "))
	}
	writeMeasureOutput(t, summary, md.String())
}
