// Command fakchaos runs fak's fault-injection harness: a real three-node
// fleet under a seeded plan of crashes, pauses, partitions and latency while
// clients append and read, then checks the recorded history for
// linearizability and lost writes. Exit code 0 means the run passed.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fak-dev/fak/chaos"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fakchaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		seed     = fs.Int64("seed", 0, "seed of the fault plan and workload (0: random, printed)")
		duration = fs.Duration("duration", 2*time.Minute, "how long to inject faults")
		mode     = fs.String("mode", "process", "fleet: process (fak agents on loopback behind a proxy) or docker (containers)")
		nemeses  = fs.String("nemeses", "all", "comma-separated fault kinds, or all")
		out      = fs.String("out", "", "directory for the report, history, logs (default: chaos-out/seed-N)")
		workers  = fs.Int("workers", 12, "concurrent clients")
		sessions = fs.Int("sessions", 6, "sessions written at once")
		tags     = fs.String("tags", "", "build tags for the fak binary (e.g. fakbug_ackearly to see a bug caught)")
		fakBin   = fs.String("fak", "", "prebuilt fak binary (default: build ./cmd/fak)")
		showPlan = fs.Bool("plan", false, "print the fault plan for the seed and exit")
		runs     = fs.Int("runs", 1, "a soak: this many runs one after another, each with a new random seed, and a table of them")
		recover  = fs.Duration("recover-after", 3*time.Second, "the nodes' --recover-after: a node down this long has its sessions recovered elsewhere")
	)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: fakchaos [flags]\n\nRuns a fak fleet under seeded faults and checks the history.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	kinds, err := chaos.ParseNemeses(*nemeses)
	if err != nil {
		fmt.Fprintln(stderr, "Error:", err)
		return 2
	}
	if *runs < 1 {
		fmt.Fprintln(stderr, "Error: -runs must be at least 1")
		return 2
	}
	if *runs > 1 && *seed != 0 {
		fmt.Fprintln(stderr, "Error: -runs draws a seed per run; -seed replays one run")
		return 2
	}
	if *seed == 0 && *runs == 1 {
		*seed = rand.Int64N(1<<31) + 1
	}
	if *showPlan {
		fmt.Fprint(stdout, chaos.NewPlan(*seed, *duration, kinds))
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := chaos.Config{
		Duration: *duration, Mode: *mode, Nemeses: kinds,
		Workload:  chaos.WorkloadConfig{Workers: *workers, ActiveSessions: *sessions},
		BuildTags: *tags, FakBin: *fakBin, Progress: stderr, RecoverAfter: *recover,
	}
	if *runs == 1 {
		cfg.Seed, cfg.OutDir = *seed, *out
		if cfg.OutDir == "" {
			cfg.OutDir = filepath.Join("chaos-out", fmt.Sprintf("seed-%d", *seed))
		}
		rep, err := chaos.Run(ctx, cfg)
		if err != nil {
			fmt.Fprintf(stderr, "Error: chaos run (seed %d) could not complete: %v\n", *seed, err)
			return 1
		}
		fmt.Fprint(stdout, rep)
		if !rep.Ok() {
			return 1
		}
		return 0
	}
	return soak(ctx, cfg, *runs, *out, stdout, stderr)
}
