package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	// 1ms..1000ms: the nearest-rank p-th percentile of 1..n is ceil(p*n/100).
	latencies := make([]time.Duration, 1000)
	for i := range latencies {
		latencies[len(latencies)-1-i] = time.Duration(i+1) * time.Millisecond // reversed: must sort
	}
	stats := summarizeLatencies(latencies)
	want := latencyStats{
		P50: 500 * time.Millisecond, P90: 900 * time.Millisecond, P99: 990 * time.Millisecond,
		P999: 999 * time.Millisecond, Max: 1000 * time.Millisecond,
	}
	if stats != want {
		t.Errorf("summarizeLatencies = %+v, want %+v", stats, want)
	}
}

func TestPercentileSmallSamples(t *testing.T) {
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("empty: %v", got)
	}
	one := []time.Duration{time.Second}
	if got := percentile(one, 0); got != time.Second {
		t.Errorf("p0 of one: %v", got)
	}
	if got := percentile(one, 99.9); got != time.Second {
		t.Errorf("p99.9 of one: %v", got)
	}
	four := []time.Duration{1, 2, 3, 4}
	for p, want := range map[float64]time.Duration{25: 1, 50: 2, 51: 3, 75: 3, 99: 4, 100: 4} {
		if got := percentile(four, p); got != want {
			t.Errorf("p%v of 1..4 = %v, want %v", p, got, want)
		}
	}
	if stats := summarizeLatencies(nil); stats != (latencyStats{}) {
		t.Errorf("summarizeLatencies(nil) = %+v", stats)
	}
}

func TestProgressLine(t *testing.T) {
	got := progressLine(3*time.Second, 41234, 100000, 0)
	if want := "[  3s] 41234/100000 events  13744 ev/s  errors 0"; got != want {
		t.Errorf("progressLine = %q, want %q", got, want)
	}
}

func TestErrorSamplesKeepFirstDistinct(t *testing.T) {
	var s errorSamples
	for i := range 20 {
		s.add(string(rune('a' + i%7)))
	}
	samples := s.samples()
	if len(samples) != maxErrorSamples {
		t.Fatalf("got %d samples, want %d", len(samples), maxErrorSamples)
	}
	if samples[0].message != "a" || samples[0].count != 3 || samples[4].message != "e" {
		t.Errorf("samples = %+v", samples)
	}
}
