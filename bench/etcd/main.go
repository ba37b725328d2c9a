// Command etcdbench measures etcd beside fak on the same machine, the
// way BenchmarkAppend measures fak: a three-member cluster in this
// process on loopback, each member with its own data directory and real
// fsync, and clients putting 256-byte values through the leader's client
// URL — one client in sequence (latency), then 64 at once (rate).
//
// It is its own module (bench/etcd/go.mod), so etcd's dependencies stay
// out of fak's. `make bench-etcd` runs it beside fak's benchmark.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	one := flag.Int("puts-1", 3000, "puts by one client")
	many := flag.Int("puts-64", 20000, "puts by 64 clients")
	base := flag.Int("port", 23790, "first of six loopback ports")
	flag.Parse()
	if err := run(*one, *many, *base); err != nil {
		fmt.Fprintln(os.Stderr, "etcdbench:", err)
		os.Exit(1)
	}
}

func run(one, many, base int) error {
	dir, err := os.MkdirTemp("", "etcdbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var peers []string
	for i := 0; i < 3; i++ {
		peers = append(peers, fmt.Sprintf("e%d=http://127.0.0.1:%d", i, base+2*i+1))
	}
	var members []*embed.Etcd
	defer func() {
		for _, m := range members {
			m.Close()
		}
	}()
	for i := 0; i < 3; i++ {
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("e%d", i)
		cfg.Dir = fmt.Sprintf("%s/e%d", dir, i)
		client, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", base+2*i))
		peer, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", base+2*i+1))
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
		cfg.InitialCluster = strings.Join(peers, ",")
		cfg.LogLevel = "error"
		m, err := embed.StartEtcd(cfg)
		if err != nil {
			return fmt.Errorf("start member %d: %w", i, err)
		}
		members = append(members, m)
	}
	for _, m := range members {
		select {
		case <-m.Server.ReadyNotify():
		case <-time.After(60 * time.Second):
			return fmt.Errorf("member %s not ready after 60 s", m.Config().Name)
		}
	}
	var leader *embed.Etcd
	for _, m := range members {
		if m.Server.Leader() == m.Server.MemberID() {
			leader = m
		}
	}
	if leader == nil {
		return fmt.Errorf("no leader")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{leader.Config().AdvertiseClientUrls[0].String()}, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	value := strings.Repeat("x", 256)
	for _, tc := range []struct{ clients, puts int }{{1, one}, {64, many}} {
		lat := make([]time.Duration, tc.puts)
		var next atomic.Int64
		var wg sync.WaitGroup
		var failed atomic.Value
		start := time.Now()
		for w := 0; w < tc.clients; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= int64(tc.puts) {
						return
					}
					t0 := time.Now()
					if _, err := cli.Put(context.Background(), fmt.Sprintf("k/%d", i%100), value); err != nil {
						failed.Store(err)
						return
					}
					lat[i] = time.Since(t0)
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		if err, ok := failed.Load().(error); ok {
			return err
		}
		slices.Sort(lat)
		pct := func(p float64) float64 {
			return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Microseconds()) / 1000
		}
		fmt.Printf("etcd clients=%d puts=%d\t%.0f puts/s\tp50 %.3f ms\tp99 %.3f ms\n",
			tc.clients, tc.puts, float64(tc.puts)/elapsed.Seconds(), pct(0.5), pct(0.99))
	}
	return nil
}
