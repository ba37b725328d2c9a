package node_test

// Benchmarks of the metering gateway (issue 15, "Figures"), on an
// in-process three-node fleet whose gateways forward to one fake upstream
// (gatewaytest), run together:
//
//	go test -run '^$' -bench BenchmarkGateway -benchtime 1x ./node
//
// Overhead: 64 concurrent streams over the four streaming APIs, phases
// alternating between a direct connection to the upstream and the same
// calls through a follower's gateway; what the gateway adds to the time to
// first byte (p50, p99), and its CPU: the process's CPU time in gateway
// phases minus direct phases (same chunks), per 1,000 chunks/s streamed.
// Exactness: 10,000 calls mixed over the four APIs, streamed and not; the
// envelope's totals must equal what the upstream reported.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fak-dev/fak/api/gateway"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// cpuTime is the process's CPU time so far (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ttfb sends one streamed call and reads it to the end; it returns the
// time to the first byte of the body and how many SSE data lines came.
func ttfb(client *http.Client, url string, hdr http.Header, body string) (time.Duration, int, error) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header = hdr.Clone()
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	buf := make([]byte, 32<<10)
	n, err := resp.Body.Read(buf)
	first := time.Since(start)
	if n == 0 && err != nil {
		return 0, 0, fmt.Errorf("status %d: no body: %v", resp.StatusCode, err)
	}
	rest, _ := io.ReadAll(resp.Body)
	lines := strings.Count(string(buf[:n])+string(rest), "data:")
	if resp.StatusCode != 200 {
		return 0, 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	return first, lines, nil
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func BenchmarkGatewayOverhead(b *testing.B) {
	c, up := gatewayFleet(b)
	// 100 chunks/s a stream, 2 s a call: a model streaming ~100 tokens/s.
	up.Chunks, up.ChunkDelay = 200, 10*time.Millisecond
	call := time.Duration(up.Chunks) * up.ChunkDelay
	gw := c.Followers()[0]
	id := createSession(b, c, c.Leader(), "gateway bench")
	streams := []gatewayCall{gatewayCalls[0], gatewayCalls[2], gatewayCalls[4], gatewayCalls[6]}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 512}}
	concurrency, phase := benchStreams(), 6*time.Second
	hdrFor := func(gc gatewayCall, viaGateway bool) http.Header {
		h := http.Header{"Content-Type": {"application/json"}}
		key := "sk-direct"
		if viaGateway {
			key = "test-token"
			h.Set(gateway.HeaderTraceID, id)
		}
		switch {
		case strings.HasPrefix(gc.path, "anthropic"):
			h.Set("X-Api-Key", key)
		case strings.HasPrefix(gc.path, "gemini"):
			h.Set("X-Goog-Api-Key", key)
		default:
			h.Set("Authorization", "Bearer "+key)
		}
		return h
	}
	run := func(viaGateway bool) (firsts []time.Duration, chunks int, cpu, wall time.Duration) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		deadline := time.Now().Add(phase)
		cpu0, start := cpuTime(), time.Now()
		for w := 0; w < concurrency; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Streams start spread over one call's length, as
				// independent agents do, not all in the same millisecond.
				time.Sleep(time.Duration(w) * call / time.Duration(concurrency))
				for i := 0; time.Now().Before(deadline); i++ {
					gc := streams[(w+i)%len(streams)]
					url := up.URL + "/" + strings.SplitN(gc.path, "/", 2)[1]
					if viaGateway {
						url = c.BaseURL(gw) + gateway.Prefix + gc.path
					}
					body := fmt.Sprintf(`{"model":%q,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"bench %d %d"}]}`, gc.model, w, i)
					first, n, err := ttfb(client, url, hdrFor(gc, viaGateway), body)
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					firsts, chunks = append(firsts, first), chunks+n
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return firsts, chunks, cpuTime() - cpu0, time.Since(start)
	}
	run(true) // warm both paths: connections, the session's replica
	run(false)
	b.ResetTimer()
	var direct, through []time.Duration
	var dChunks, gChunks int
	var dCPU, gCPU, dWall, gWall time.Duration
	for i := 0; i < b.N; i++ {
		for _, via := range []bool{false, true, false, true} {
			f, n, cpu, wall := run(via)
			if via {
				through, gChunks, gCPU, gWall = append(through, f...), gChunks+n, gCPU+cpu, gWall+wall
			} else {
				direct, dChunks, dCPU, dWall = append(direct, f...), dChunks+n, dCPU+cpu, dWall+wall
			}
		}
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	// CPU per second of wall time, each phase kind, normalised to its
	// chunk rate; the gateway's share is the difference.
	dRate, gRate := float64(dChunks)/dWall.Seconds(), float64(gChunks)/gWall.Seconds()
	dLoad, gLoad := dCPU.Seconds()/dWall.Seconds(), gCPU.Seconds()/gWall.Seconds()
	perK := (gLoad/gRate - dLoad/dRate) * 1000 * 100 // % of a core per 1,000 chunks/s
	b.ReportMetric(ms(pct(direct, 0.5)), "ttfb-direct-p50-ms")
	b.ReportMetric(ms(pct(through, 0.5)), "ttfb-gateway-p50-ms")
	b.ReportMetric(ms(pct(through, 0.5)-pct(direct, 0.5)), "added-p50-ms")
	b.ReportMetric(ms(pct(through, 0.99)-pct(direct, 0.99)), "added-p99-ms")
	b.ReportMetric(gRate, "chunks/s")
	b.ReportMetric(perK, "cpu-%-per-1k-chunks/s")
	b.Logf("direct: %d calls, %d chunks at %.0f/s, CPU %.1f%% of a core; gateway: %d calls, %d chunks at %.0f/s, CPU %.1f%%",
		len(direct), dChunks, dRate, dLoad*100, len(through), gChunks, gRate, gLoad*100)
	b.Logf("time to first byte p50 direct %.2f ms, through the gateway %.2f ms (p99 %.2f / %.2f ms)",
		ms(pct(direct, 0.5)), ms(pct(through, 0.5)), ms(pct(direct, 0.99)), ms(pct(through, 0.99)))
}

func BenchmarkGatewayExact(b *testing.B) {
	c, up := gatewayFleet(b)
	id := createSession(b, c, c.Leader(), "gateway exact")
	nodes := c.Followers()
	nodes = append(nodes, c.Leader())
	const calls, concurrency = 10000, 32
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before := up.Totals()
		start := time.Now()
		var wg sync.WaitGroup
		next := make(chan int)
		for w := 0; w < concurrency; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range next {
					gc := gatewayCalls[k%len(gatewayCalls)]
					n := nodes[k%len(nodes)]
					if code, body := gc.do(b, c.HTTPClient(), c.BaseURL(n)+gateway.Prefix, i*calls+k, map[string]string{gateway.HeaderTraceID: id}); code != 200 {
						b.Errorf("%s via %s: %d %s", gc.path, n.Name, code, body)
						return
					}
				}
			}()
		}
		for k := 0; k < calls; k++ {
			next <- k
		}
		close(next)
		wg.Wait()
		answered := time.Since(start)
		after := up.Totals()
		wantQ := uint64((i + 1) * calls)
		var used *fakv1.Budget
		c.WaitFor(2*time.Minute, "every charge", func() bool {
			used = envelopeOf(b, c, c.Leader(), id).GetUsed()
			return used.GetQueries() >= wantQ
		})
		if used.GetQueries() != wantQ || used.GetInputTokens() != after.PromptTokens || used.GetOutputTokens() != after.OutputTokens {
			b.Fatalf("charged %d queries, %d input, %d output; the upstream reported %d calls, %d prompt, %d output tokens",
				used.GetQueries(), used.GetInputTokens(), used.GetOutputTokens(), after.Calls, after.PromptTokens, after.OutputTokens)
		}
		b.ReportMetric(float64(calls)/answered.Seconds(), "calls/s")
		b.Logf("%d calls over 4 APIs in %s; envelope = upstream: %d queries, %d input, %d output tokens (this round: %d prompt, %d output)",
			calls, answered.Round(time.Millisecond), used.GetQueries(), used.GetInputTokens(), used.GetOutputTokens(),
			after.PromptTokens-before.PromptTokens, after.OutputTokens-before.OutputTokens)
	}
}

// benchStreams is the overhead benchmark's concurrency: 64, or
// FAK_BENCH_STREAMS.
func benchStreams() int {
	if n, err := strconv.Atoi(os.Getenv("FAK_BENCH_STREAMS")); err == nil && n > 0 {
		return n
	}
	return 64
}
