package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

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
				for _, db := range []string{"fsm.db", filepath.Join("raft", "wal")} {
					size, ok := diskSize(filepath.Join(a.dataDir, db))
					if !ok {
						continue
					}
					key := a.name + "/" + db
					if old, ok := sizes[key]; ok && size != old {
						events = append(events, storageEvent{At: now, Node: a.name,
							What: fmt.Sprintf("%s %d -> %d MiB", filepath.Base(db), old>>20, size>>20)})
					}
					sizes[key] = size
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

// diskSize is the size of a file, or of the files in a directory (the
// Raft log's segments).
func diskSize(path string) (int64, bool) {
	info, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	if !info.IsDir() {
		return info.Size(), true
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return 0, false
	}
	var n int64
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && !fi.IsDir() {
			n += fi.Size()
		}
	}
	return n, true
}
