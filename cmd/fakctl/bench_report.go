package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// reportProgress prints a progress line to w every second until the
// returned function is called. On a terminal the line is redrawn in place.
func (b *appendBench) reportProgress(w io.Writer, start time.Time) (stop func()) {
	inPlace := isTerminal(w)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		printed := false
		for {
			select {
			case <-done:
				if inPlace && printed {
					fmt.Fprintln(w)
				}
				return
			case now := <-ticker.C:
				line := progressLine(now.Sub(start), b.appended.Load(), b.cfg.total, b.failed.Load())
				if inPlace {
					fmt.Fprintf(w, "\r%s\x1b[K", line) // \x1b[K clears the rest of the old line
				} else {
					fmt.Fprintln(w, line)
				}
				printed = true
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

func progressLine(elapsed time.Duration, events, total, errors int64) string {
	rate := int64(0)
	if elapsed > 0 {
		rate = int64(float64(events) / elapsed.Seconds())
	}
	seconds := int64(elapsed.Round(time.Second) / time.Second)
	return fmt.Sprintf("[%3ds] %d/%d events  %d ev/s  errors %d", seconds, events, total, rate, errors)
}

// benchSummary is the result of a benchmark, as printed with -o json.
type benchSummary struct {
	Addrs           []string      `json:"addrs"`
	Sessions        int           `json:"sessions"`
	Clients         int           `json:"clients"`
	Batch           int           `json:"batch"`
	Size            int           `json:"size"`
	Events          int64         `json:"events"`
	Calls           int64         `json:"calls"`
	Errors          int64         `json:"errors"`
	ElapsedSeconds  float64       `json:"elapsed_seconds"`
	EventsPerSecond float64       `json:"events_per_second"`
	CallsPerSecond  float64       `json:"calls_per_second"`
	LatencyMillis   latencyMillis `json:"latency_ms"`
	ErrorSamples    []string      `json:"error_samples,omitempty"`
	Interrupted     bool          `json:"interrupted,omitempty"`

	latency latencyStats
}

// latencyMillis is latencyStats in milliseconds, for JSON.
type latencyMillis struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

func (b *appendBench) summarize(elapsed time.Duration) benchSummary {
	// Filter in place: the run is over and the slice may be large.
	succeeded := b.latencies[:0]
	for _, latency := range b.latencies {
		if latency > 0 {
			succeeded = append(succeeded, latency)
		}
	}
	latency := summarizeLatencies(succeeded)
	s := benchSummary{
		Addrs:    b.cfg.baseURLs,
		Sessions: b.cfg.sessions,
		Clients:  b.cfg.clients,
		Batch:    b.cfg.batch,
		Size:     b.cfg.size,
		Events:   b.appended.Load(),
		Calls:    b.calls.Load(),
		Errors:   b.failed.Load(),
		LatencyMillis: latencyMillis{
			P50: millis(latency.P50), P90: millis(latency.P90), P99: millis(latency.P99),
			P999: millis(latency.P999), Max: millis(latency.Max),
		},
		ElapsedSeconds: elapsed.Seconds(),
		latency:        latency,
	}
	if elapsed > 0 {
		s.EventsPerSecond = float64(s.Events) / elapsed.Seconds()
		s.CallsPerSecond = float64(s.Calls) / elapsed.Seconds()
	}
	for _, sample := range b.errors.samples() {
		s.ErrorSamples = append(s.ErrorSamples, sample.message)
	}
	return s
}

func (s benchSummary) fields() [][2]string {
	round := func(d time.Duration) string { return d.Round(time.Microsecond).String() }
	return [][2]string{
		{"Events", fmt.Sprint(s.Events)},
		{"Calls", fmt.Sprint(s.Calls)},
		{"Errors", fmt.Sprint(s.Errors)},
		{"Elapsed", time.Duration(s.ElapsedSeconds * float64(time.Second)).Round(time.Millisecond).String()},
		{"Events/s", fmt.Sprintf("%.0f", s.EventsPerSecond)},
		{"Calls/s", fmt.Sprintf("%.0f", s.CallsPerSecond)},
		{"Latency p50", round(s.latency.P50)},
		{"Latency p90", round(s.latency.P90)},
		{"Latency p99", round(s.latency.P99)},
		{"Latency p99.9", round(s.latency.P999)},
		{"Latency max", round(s.latency.Max)},
	}
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// maxErrorSamples is how many distinct error messages a benchmark reports.
const maxErrorSamples = 5

// errorSamples counts failures by message, keeping the first few distinct
// messages so a run with thousands of failures reports them briefly.
type errorSamples struct {
	mu     sync.Mutex
	counts map[string]int64
	order  []string
}

type errorSample struct {
	message string
	count   int64
}

func (s *errorSamples) add(message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, seen := s.counts[message]; seen {
		s.counts[message]++
		return
	}
	if len(s.order) < maxErrorSamples {
		if s.counts == nil {
			s.counts = make(map[string]int64)
		}
		s.counts[message] = 1
		s.order = append(s.order, message)
	}
}

func (s *errorSamples) samples() []errorSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	samples := make([]errorSample, 0, len(s.order))
	for _, message := range s.order {
		samples = append(samples, errorSample{message: message, count: s.counts[message]})
	}
	return samples
}

// isTerminal reports whether w is a character device such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
