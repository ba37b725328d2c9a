package node_test

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// BenchmarkTransferCeiling is what BenchmarkMoveWorkspace100MB's fetch is
// read against: the barest verified transfer of 100 MB this machine can
// do, with none of fak in it. A source serves a pack file over plain
// HTTP/1.1 on loopback (the kernel's sendfile, no TLS, no framing), and
// the destination reads 1,000 chunks of 100 KB, checks each one's SHA-256
// (the contract verifies every chunk where it lands), writes them to one
// file and fsyncs: with one stream and two (both cores hashing), and with
// two streams not verifying (what the hashing costs). Beside them, the
// disk alone: the same 100 MB written and fsynced. Reported as MB/s (the
// median of b.N rounds); run with -benchtime 9x.
func BenchmarkTransferCeiling(b *testing.B) {
	warmPageCache(b, 4<<30)
	dir := b.TempDir()
	const chunk, chunks = 100_000, 1000
	data := make([]byte, chunk*chunks)
	if _, err := rand.Read(data); err != nil {
		b.Fatal(err)
	}
	sums := make([][32]byte, chunks)
	for i := range sums {
		sums[i] = sha256.Sum256(data[i*chunk : (i+1)*chunk])
	}
	pack := filepath.Join(dir, "pack")
	if err := os.WriteFile(pack, data, 0o600); err != nil {
		b.Fatal(err)
	}
	url := serveRanges(b, pack, chunk)

	fetch := func(streams int, verify bool) time.Duration {
		out, err := os.MkdirTemp(dir, "dst")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(out)
		start := time.Now()
		per := chunks / streams
		errs := make(chan error, streams)
		var wg sync.WaitGroup
		for s := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- fetchRange(url, filepath.Join(out, fmt.Sprint(s)), s*per, (s+1)*per, chunk, sums, verify)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var disk, one, two, twoUnverified []time.Duration
	b.ResetTimer()
	for range b.N {
		disk = append(disk, write100MB(b, dir))
		one = append(one, fetch(1, true))
		two = append(two, fetch(2, true))
		twoUnverified = append(twoUnverified, fetch(2, false))
	}
	b.StopTimer()
	for _, r := range []struct {
		name string
		d    []time.Duration
	}{{"disk", disk}, {"one-stream", one}, {"two-streams", two}, {"two-unverified", twoUnverified}} {
		reportP50(b, r.d, r.name)
		b.ReportMetric(100/r.d[len(r.d)/2].Seconds(), r.name+"-MB/s")
	}
}

// serveRanges serves pack on loopback: GET /?from=F&to=T answers chunks
// [F, T) of size chunk, copied from the file by the kernel.
func serveRanges(b *testing.B, pack string, chunk int) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var from, to int
		if _, err := fmt.Sscanf(r.URL.RawQuery, "from=%d&to=%d", &from, &to); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f, err := os.Open(pack)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		n := int64((to - from) * chunk)
		w.Header().Set("Content-Length", fmt.Sprint(n))
		// An *os.File section: net/http's response writer hands it to
		// sendfile.
		io.Copy(w, io.NewSectionReader(f, int64(from*chunk), n))
	})}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

// fetchRange reads chunks [from, to) from url into the file path, checking
// each against sums when verify, and fsyncs it.
func fetchRange(url, path string, from, to, chunk int, sums [][32]byte, verify bool) error {
	resp, err := http.Get(fmt.Sprintf("%s?from=%d&to=%d", url, from, to))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	in := bufio.NewReaderSize(resp.Body, 1<<20)
	buf := make([]byte, chunk)
	for i := from; i < to; i++ {
		if _, err := io.ReadFull(in, buf); err != nil {
			return err
		}
		if verify && sha256.Sum256(buf) != sums[i] {
			return fmt.Errorf("chunk %d: digest mismatch", i)
		}
		if _, err := f.Write(buf); err != nil {
			return err
		}
	}
	return f.Sync()
}
