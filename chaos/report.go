package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fak-dev/fak/chaos/checker"
	"github.com/fak-dev/fak/chaos/history"
)

// Report is what a run found.
type Report struct {
	Seed      int64         `json:"seed"`
	Mode      string        `json:"mode"`
	Fleet     string        `json:"fleet"`
	BuildTags string        `json:"build_tags,omitempty"`
	Duration  time.Duration `json:"duration"`
	Nemeses   []NemesisKind `json:"nemeses"`
	OutDir    string        `json:"out_dir"`
	Faults    []FaultEvent  `json:"faults"`
	// Upgrade is the rolling upgrade a run did in place of faults.
	Upgrade *UpgradeReport `json:"upgrade,omitempty"`

	Ops, OK, Failed, Info int
	Appends, Reads        int
	// Throughput of successful operations per second, during faults and
	// while the fleet was calm.
	ThroughputFaults float64 `json:"throughput_faults"`
	ThroughputCalm   float64 `json:"throughput_calm"`
	// LongestUnavailable is the longest stretch with no successful
	// operation while the load ran, and when it began.
	LongestUnavailable   time.Duration `json:"longest_unavailable"`
	LongestUnavailableAt time.Duration `json:"longest_unavailable_at"`

	Linearizability checker.Result           `json:"-"`
	Durability      checker.DurabilityResult `json:"-"`
	Addresses       checker.AddressResult    `json:"-"`
	Leases          checker.LeaseResult      `json:"-"`
	Boundaries      checker.BoundaryResult   `json:"-"`
	Epochs          checker.EpochResult      `json:"-"`
	Turns           checker.TurnResult       `json:"-"`
	// Model is what the model workload did (issue 14).
	Model           ModelStats `json:"model"`
	MovesRequested  int64      `json:"moves_requested"`
	MovesRefused    int64      `json:"moves_refused"`
	ReplicaProblems []string   `json:"replica_problems,omitempty"`
	// FleetEventSessions counts the workload sessions whose final journal
	// holds events the fleet wrote itself (recovery moves), FleetEvents
	// those events: the addresses the checkers had to place around them.
	FleetEventSessions int `json:"fleet_event_sessions"`
	FleetEvents        int `json:"fleet_events"`
	// ReplayChecks is each node's replay-equivalence check, before and
	// after the final restart; ReplayProblems the ones that failed.
	ReplayChecks   []string `json:"replay_checks"`
	ReplayProblems []string `json:"replay_problems,omitempty"`
	Logs           []string `json:"logs"`
}

// Ok is the verdict: linearizable, durable, one lease holder at a time,
// every input answered once, and every replica identical.
func (r *Report) Ok() bool {
	return r.Linearizability.Ok() && r.Durability.Ok && r.Addresses.Ok && r.Leases.Ok && r.Boundaries.Ok && r.Epochs.Ok && r.Turns.Ok && len(r.Model.AnswerViolations) == 0 &&
		len(r.Model.Workspaces.Violations) == 0 &&
		len(r.ReplicaProblems) == 0 && len(r.ReplayProblems) == 0
}

func (r *Report) stats(ops []history.Op, faults []FaultEvent, loadStart, loadEnd time.Duration) {
	var oks []int64
	for _, op := range ops {
		if op.Kind == history.Watch {
			continue // observations for the address checker, not load
		}
		r.Ops++
		if op.Kind == history.Append {
			r.Appends++
		} else {
			r.Reads++
		}
		switch op.Outcome {
		case history.OK:
			r.OK++
			oks = append(oks, op.Return)
		case history.Fail:
			r.Failed++
		case history.Info:
			r.Info++
		}
	}
	slices.Sort(oks)
	inFault := func(t time.Duration) bool {
		for _, f := range faults {
			if f.Skipped == "" && t >= f.Start && t < f.End {
				return true
			}
		}
		return false
	}
	var faultTime time.Duration
	for _, f := range mergeWindows(faults) {
		faultTime += f[1] - f[0]
	}
	var nFault, nCalm int
	for _, t := range oks {
		if inFault(time.Duration(t)) {
			nFault++
		} else {
			nCalm++
		}
	}
	if faultTime > 0 {
		r.ThroughputFaults = float64(nFault) / faultTime.Seconds()
	}
	if calm := loadEnd - loadStart - faultTime; calm > 0 {
		r.ThroughputCalm = float64(nCalm) / calm.Seconds()
	}
	prev := int64(loadStart)
	for _, t := range append(oks, int64(loadEnd)) {
		if gap := time.Duration(t - prev); gap > r.LongestUnavailable {
			r.LongestUnavailable, r.LongestUnavailableAt = gap, time.Duration(prev)
		}
		prev = t
	}
}

// mergeWindows returns the union of the fault windows as [start,end) pairs.
func mergeWindows(faults []FaultEvent) [][2]time.Duration {
	var ws [][2]time.Duration
	for _, f := range faults {
		if f.Skipped == "" && f.End > f.Start {
			ws = append(ws, [2]time.Duration{f.Start, f.End})
		}
	}
	slices.SortFunc(ws, func(a, b [2]time.Duration) int { return int(a[0] - b[0]) })
	var out [][2]time.Duration
	for _, w := range ws {
		if n := len(out); n > 0 && w[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], w[1])
			continue
		}
		out = append(out, w)
	}
	return out
}

// String is the human report.
func (r *Report) String() string {
	var b strings.Builder
	verdict := "PASS"
	if !r.Ok() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "chaos run %s: seed %d, %s of faults, %s\n", verdict, r.Seed, r.Duration, r.Fleet)
	if r.BuildTags != "" {
		fmt.Fprintf(&b, "build tags: %s\n", r.BuildTags)
	}
	ran, skipped := 0, 0
	kinds := map[NemesisKind]int{}
	for _, f := range r.Faults {
		if f.Skipped != "" {
			skipped++
			continue
		}
		ran++
		kinds[f.Kind]++
	}
	var ks []string
	for k, n := range kinds {
		ks = append(ks, fmt.Sprintf("%s×%d", k, n))
	}
	slices.Sort(ks)
	fmt.Fprintf(&b, "faults: %d injected (%s), %d skipped\n", ran, strings.Join(ks, " "), skipped)
	for _, f := range r.Faults {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	fmt.Fprintf(&b, "operations: %d (%d appends, %d reads): %d ok, %d failed, %d indeterminate\n", r.Ops, r.Appends, r.Reads, r.OK, r.Failed, r.Info)
	fmt.Fprintf(&b, "throughput: %.0f ok ops/s during faults, %.0f ok ops/s calm\n", r.ThroughputFaults, r.ThroughputCalm)
	fmt.Fprintf(&b, "longest unavailability: %s (from %s)\n", r.LongestUnavailable.Round(time.Millisecond), r.LongestUnavailableAt.Round(time.Millisecond))
	fmt.Fprintf(&b, "journals: %d workload session(s) hold %d event(s) the fleet wrote itself (recovery moves)\n", r.FleetEventSessions, r.FleetEvents)
	fmt.Fprintf(&b, "%s\n", r.Linearizability.Summary())
	fmt.Fprintf(&b, "%s\n", r.Durability.Summary())
	fmt.Fprintf(&b, "%s\n", r.Addresses.Summary())
	fmt.Fprintf(&b, "%s\n", r.Leases.Summary())
	fmt.Fprintf(&b, "%s\n", r.Boundaries.Summary())
	fmt.Fprintf(&b, "%s (%d moves requested, %d refused)\n", r.Epochs.Summary(), r.MovesRequested, r.MovesRefused)
	fmt.Fprintf(&b, "%s\n", r.turnsLine())
	if r.Model.Off == "" {
		fmt.Fprintf(&b, "%s\n", r.answersLine())
		fmt.Fprintf(&b, "%s\n", r.workspacesLine())
	}
	if len(r.ReplicaProblems) == 0 {
		b.WriteString("replicas: identical on every node\n")
	} else {
		fmt.Fprintf(&b, "replicas: %d differences\n", len(r.ReplicaProblems))
		for i, p := range r.ReplicaProblems {
			if i == 10 {
				fmt.Fprintf(&b, "  … %d more\n", len(r.ReplicaProblems)-10)
				break
			}
			fmt.Fprintf(&b, "  %s\n", p)
		}
	}
	if len(r.ReplayProblems) == 0 {
		fmt.Fprintf(&b, "replay: every node's live state equals its rebuild from snapshot + log (%d checks)\n", len(r.ReplayChecks))
	} else {
		fmt.Fprintf(&b, "replay: %d node(s) differ from their rebuild\n", len(r.ReplayProblems))
		for _, p := range r.ReplayProblems {
			fmt.Fprintf(&b, "  %s\n", p)
		}
	}
	for _, l := range r.ReplayChecks {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	fmt.Fprintf(&b, "artifacts: %s\n", r.OutDir)
	return b.String()
}

// turnsLine is the Turns verdict and what the model workload did.
func (r *Report) turnsLine() string {
	m := r.Model
	var what string
	if m.Off != "" {
		what = fmt.Sprintf("no model sessions (%s); %d lease session(s) on echo", m.Off, m.LeaseSessions)
	} else {
		what = fmt.Sprintf("%d model session(s): %d inputs sent, %d acknowledged, %d refused, %d unknown; %d model requests; %d moves, %d recoveries; %d lease session(s) on echo",
			m.Sessions, m.Sent, m.Acked, m.Refused, m.Unknown, m.Requests, m.Moves, m.Recoveries, m.LeaseSessions)
	}
	settled := fmt.Sprintf("settled in %s", m.Settle.Round(100*time.Millisecond))
	if len(m.Unsettled) > 0 {
		settled = fmt.Sprintf("%d still busy after %s: %s", len(m.Unsettled), m.Settle.Round(time.Second), strings.Join(m.Unsettled, " "))
	}
	summary, rest, _ := strings.Cut(r.Turns.Summary(), "\n")
	line := fmt.Sprintf("%s (%s; %s)", summary, what, settled)
	if rest != "" {
		line += "\n" + rest
	}
	return line
}

// answersLine is the verdict on what the model turns said, in the shape
// of every checker's summary.
func (r *Report) answersLine() string {
	v := r.Model.AnswerViolations
	counts := fmt.Sprintf("%d completed model turns", r.Model.Answers)
	if len(v) == 0 {
		counts += " each said exactly the model's reply to their own input"
	}
	return checker.Summarize("answers", v, counts)
}

// workspacesLine is the verdict of the workspace witness chain.
func (r *Report) workspacesLine() string {
	w := r.Model.Workspaces
	counts := fmt.Sprintf("%d model turns read the workspace (%d first after a move's cutover, %d after a recovery)", w.Reads, w.AfterMoves, w.AfterRecoveries)
	if len(w.Violations) == 0 {
		counts += "; each found what the session's last write left"
	}
	return checker.Summarize("workspaces", w.Violations, counts)
}

func (r *Report) write(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte(r.String()), 0o644); err != nil {
		return err
	}
	type jsonReport struct {
		*Report
		Pass            bool     `json:"pass"`
		Linearizability string   `json:"linearizability"`
		IllegalSessions []string `json:"illegal_sessions,omitempty"`
		Durability      string   `json:"durability"`
		Addresses       string   `json:"addresses"`
		Leases          string   `json:"leases"`
		Boundaries      string   `json:"boundaries"`
		Epochs          string   `json:"epochs"`
		Turns           string   `json:"turns"`
		Violations      []string `json:"violations,omitempty"`
	}
	jr := jsonReport{Report: r, Pass: r.Ok(), Linearizability: r.Linearizability.Summary(),
		IllegalSessions: r.Linearizability.IllegalSessions, Durability: r.Durability.Summary(), Addresses: r.Addresses.Summary(), Leases: r.Leases.Summary(), Boundaries: r.Boundaries.Summary(), Epochs: r.Epochs.Summary(), Turns: r.Turns.Summary()}
	for _, v := range append(r.Durability.Violations, r.Addresses.Violations...) {
		jr.Violations = append(jr.Violations, v.String())
	}
	b, err := json.MarshalIndent(jr, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644)
}

// writeJSON writes v to path, indented: an artifact a person reads.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
