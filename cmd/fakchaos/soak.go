package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fak-dev/fak/chaos"
)

// soak runs cfg n times with fresh random seeds, one after another, each
// into its own directory under out, printing a line as each run ends and a
// table at the end. It returns 1 if any run failed or could not complete.
func soak(ctx context.Context, cfg chaos.Config, n int, out string, stdout, stderr io.Writer) int {
	if out == "" {
		out = filepath.Join("chaos-out", fmt.Sprintf("soak-%s-%d", cfg.Mode, time.Now().Unix()))
	}
	if cfg.FakBin == "" { // build once, not once per run
		bin, err := chaos.BuildFak(out, cfg.BuildTags)
		if err != nil {
			fmt.Fprintln(stderr, "Error:", err)
			return 1
		}
		cfg.FakBin = bin
	}
	var rows []string
	failed := 0
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		cfg.Seed = rand.Int64N(1<<31) + 1
		cfg.OutDir = filepath.Join(out, fmt.Sprintf("seed-%d", cfg.Seed))
		fmt.Fprintf(stderr, "soak run %d/%d: %s mode, seed %d\n", i+1, n, cfg.Mode, cfg.Seed)
		start := time.Now()
		rep, err := chaos.Run(ctx, cfg)
		row := soakRow(cfg, rep, err, time.Since(start))
		if err != nil || !rep.Ok() {
			failed++
		}
		if rep != nil {
			fmt.Fprintf(stderr, "%s", rep)
		}
		fmt.Fprintln(stdout, strings.ReplaceAll(row, "\t", "  "))
		rows = append(rows, row)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nVERDICT\tMODE\tSEED\tFAULTS\tOPS\tOK\tCALM OK/S\tACKED PRESENT\tADDRESSES\tFLEET EVENTS\tWALL")
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "%d of %d run(s) passed\n", len(rows)-failed, len(rows))
	if failed > 0 || len(rows) < n {
		return 1
	}
	return 0
}

// soakRow is one run as a tab-separated table row.
func soakRow(cfg chaos.Config, rep *chaos.Report, err error, wall time.Duration) string {
	if err != nil {
		return strings.Join([]string{"ERROR", cfg.Mode, fmt.Sprint(cfg.Seed), "-", "-", "-", "-", "-", "-", "-", wall.Round(time.Second).String() + ": " + err.Error()}, "\t")
	}
	verdict := "PASS"
	if !rep.Ok() {
		verdict = "FAIL"
	}
	injected := 0
	for _, f := range rep.Faults {
		if f.Skipped == "" {
			injected++
		}
	}
	return strings.Join([]string{
		verdict, cfg.Mode, fmt.Sprint(cfg.Seed), fmt.Sprint(injected), fmt.Sprint(rep.Ops), fmt.Sprint(rep.OK),
		fmt.Sprintf("%.0f", rep.ThroughputCalm),
		fmt.Sprintf("%d/%d", rep.Durability.Present, rep.Durability.Acked),
		fmt.Sprint(rep.Addresses.Addresses),
		fmt.Sprintf("%d in %d sessions", rep.FleetEvents, rep.FleetEventSessions),
		wall.Round(time.Second).String(),
	}, "\t")
}
