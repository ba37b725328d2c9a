package node_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
)

// BenchmarkRawRaftApply is the ceiling fak's append path is compared with:
// three hashicorp/raft nodes in this process over loopback TCP, a no-op FSM
// and one client applying 256-byte entries, with each of the two log
// stores: raft-boltdb (the usual one) and raft-wal (fak's). Run it in the
// same `go test -bench` invocation as BenchmarkAppend/clients=1 to compare
// p50 latencies on equal terms; with 64 appliers on the WAL it is the rate
// Raft alone reaches (no FSM, no API), beside BenchmarkAppend/clients=64.
func BenchmarkRawRaftApply(b *testing.B) {
	bolt := func(dir string) (raft.LogStore, raft.StableStore, io.Closer, error) {
		s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
		return s, s, s, err
	}
	wal := func(dir string) (raft.LogStore, raft.StableStore, io.Closer, error) {
		w, err := raftwal.Open(dir)
		return w, w, w, err
	}
	b.Run("log=boltdb", func(b *testing.B) { benchRawRaft(b, 1, bolt) })
	b.Run("log=wal", func(b *testing.B) { benchRawRaft(b, 1, wal) })
	b.Run("log=wal,appliers=64", func(b *testing.B) { benchRawRaft(b, 64, wal) })
}

func benchRawRaft(b *testing.B, appliers int, open func(dir string) (raft.LogStore, raft.StableStore, io.Closer, error)) {
	var nodes []*raft.Raft
	var servers []raft.Server
	var transports []*raft.NetworkTransport
	dir := b.TempDir()
	for i := 0; i < 3; i++ {
		trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 10*time.Second, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		transports = append(transports, trans)
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprint(i)), Address: trans.LocalAddr()})
	}
	for i := 0; i < 3; i++ {
		cfg := raft.DefaultConfig()
		cfg.LocalID = servers[i].ID
		cfg.Logger = hclog.NewNullLogger()
		nodeDir := filepath.Join(dir, fmt.Sprint(i))
		if err := os.Mkdir(nodeDir, 0o700); err != nil {
			b.Fatal(err)
		}
		logs, stable, closer, err := open(nodeDir)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { closer.Close() })
		r, err := raft.NewRaft(cfg, noopFSM{}, logs, stable, raft.NewDiscardSnapshotStore(), transports[i])
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Shutdown().Error() })
		if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, r)
	}
	var leader *raft.Raft
	deadline := time.Now().Add(10 * time.Second)
	for leader == nil && time.Now().Before(deadline) {
		for _, r := range nodes {
			if r.State() == raft.Leader {
				leader = r
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if leader == nil {
		b.Fatal("no leader")
	}
	entry := make([]byte, 256)
	driveClients(b, appliers, 1, func(int64) error { return leader.Apply(entry, 0).Error() })
}

type noopFSM struct{}

func (noopFSM) Apply(*raft.Log) interface{}         { return nil }
func (noopFSM) Snapshot() (raft.FSMSnapshot, error) { return noopSnapshot{}, nil }
func (noopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type noopSnapshot struct{}

func (noopSnapshot) Persist(s raft.SnapshotSink) error { return s.Close() }
func (noopSnapshot) Release()                          {}
