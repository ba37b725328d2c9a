package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/workspace"
)

// peerWorkspaces reaches other nodes' workspace stores for the runner: a
// move's destination reads the manifest and the chunks the source
// checkpointed through the source's RunnerService, with this node's own
// token and peer TLS, at the API address its node record gives.
type peerWorkspaces struct {
	f     *fsm.FSM
	token func() string
	tls   *tls.Config

	mu      sync.Mutex
	clients map[string]fakv1connect.RunnerServiceClient // by API address
}

func newPeerWorkspaces(f *fsm.FSM, token func() string, tlsCfg *tls.Config) *peerWorkspaces {
	return &peerWorkspaces{f: f, token: token, tls: tlsCfg, clients: map[string]fakv1connect.RunnerServiceClient{}}
}

// source is node's workspace store as the runner reads it.
func (p *peerWorkspaces) source(node string) (runner.WorkspaceSource, error) {
	recs, err := p.f.Nodes()
	if err != nil {
		return nil, err
	}
	addr := ""
	for _, r := range recs {
		if r.Name == node {
			addr = r.ApiAddr
		}
	}
	if addr == "" {
		return nil, fmt.Errorf("node %s has no node record with an API address", node)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.clients[addr]
	if c == nil {
		// Chunks are sent as they are: an agent's files are often
		// compressed already, and gzip of a 1 MiB chunk costs the source
		// more than the wire saves on a LAN.
		hc, base, opts := nodeClient(addr, p.token, p.tls)
		c = fakv1connect.NewRunnerServiceClient(hc, base, append(opts, connect.WithAcceptCompression("gzip", nil, nil))...)
		p.clients[addr] = c
	}
	return peerSource{c}, nil
}

type peerSource struct {
	c fakv1connect.RunnerServiceClient
}

func (s peerSource) Manifest(ctx context.Context, digest string) ([]byte, error) {
	resp, err := s.c.GetWorkspaceManifest(ctx, connect.NewRequest(&fakv1.GetWorkspaceManifestRequest{Digest: digest}))
	if err != nil {
		return nil, classify(err)
	}
	return resp.Msg.Manifest, nil
}

// Copy asks the peer to hold a copy of a session's workspace snapshot,
// read from node from.
func (s peerSource) Copy(ctx context.Context, sessionID, digest, from string) (*fsmpb.WorkspaceTransfer, error) {
	resp, err := s.c.CopyWorkspace(ctx, connect.NewRequest(&fakv1.CopyWorkspaceRequest{SessionId: sessionID, Digest: digest, FromNode: from}))
	if err != nil {
		return nil, classify(err)
	}
	m := resp.Msg
	return &fsmpb.WorkspaceTransfer{BytesSent: m.BytesSent, BytesPresent: m.BytesPresent, ChunksSent: m.ChunksSent,
		ChunksPresent: m.ChunksPresent, FetchNanos: m.FetchNanos}, nil
}

func (s peerSource) Chunks(ctx context.Context, hashes []string, put func(hash string, data []byte) error) error {
	stream, err := s.c.FetchWorkspaceChunks(ctx, connect.NewRequest(&fakv1.FetchWorkspaceChunksRequest{Hashes: hashes}))
	if err != nil {
		return classify(err)
	}
	defer stream.Close()
	for stream.Receive() {
		m := stream.Msg()
		if err := put(m.Hash, m.Data); err != nil {
			return err
		}
	}
	if err := stream.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return classify(err)
	}
	return ctx.Err()
}

// Workspace snapshots a node keeps: every checkpoint re-stores the chunks
// of the tree it takes, and a restore stores what it fetched, so what has
// not been written for storeRetention belongs to no move in progress. It
// stays that long so a session moving back finds its chunks here.
const (
	storeRetention = 24 * time.Hour
	storeSweep     = time.Hour
)

// sweepWorkspaceStore removes what the store has not written for
// storeRetention, every storeSweep, until ctx ends.
func (n *Node) sweepWorkspaceStore(ctx context.Context, store *workspace.Store) {
	t := time.NewTicker(storeSweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := store.Remove(storeRetention); err != nil {
				n.logger.Warn("sweeping the workspace store", "error", err)
			}
		}
	}
}
