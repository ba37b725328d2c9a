package api

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Forwarding. A write received by a follower is sent to the leader as the
// same RPC (with the request id already stamped, so a retry after an
// indeterminate failure is deduplicated by the FSM). Across an election the
// attempt is retried with backoff for up to holdTimeout, like Consul's
// RPCHoldTimeout.
const (
	holdTimeout     = 7 * time.Second
	minRetryBackoff = 10 * time.Millisecond
	maxRetryBackoff = 200 * time.Millisecond

	// headerForwarded marks a forwarded call; a non-leader receiving one
	// answers NOT_LEADER instead of forwarding again (no loops).
	headerForwarded = "Fak-Forwarded-By"
)

// peerClients are Connect clients for one peer's API address.
type peerClients struct {
	session   fakv1connect.SessionServiceClient
	cluster   fakv1connect.ClusterServiceClient
	runner    fakv1connect.RunnerServiceClient
	lifecycle fakv1connect.LifecycleServiceClient
	node      fakv1connect.NodeServiceClient
	operator  fakv1connect.OperatorServiceClient
	acl       fakv1connect.AclServiceClient
}

type peerPool struct {
	httpClient *http.Client
	// scheme of peers' APIs: https when this node has a TLS identity, since
	// gossip carries bare host:port addresses and a fleet is all TLS or not.
	scheme string
	mu     sync.Mutex
	peers  map[string]*peerClients
}

func newPeerPool(dial func(ctx context.Context, network, addr string) (net.Conn, error), tlsCfg *tls.Config) *peerPool {
	return &peerPool{httpClient: apiclient.NewTLSHTTPClient(tlsCfg, dial), scheme: apiclient.Scheme(tlsCfg != nil),
		peers: make(map[string]*peerClients)}
}

func (p *peerPool) get(addr string) *peerClients {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.peers[addr]; ok {
		return c
	}
	base := addr
	if !strings.Contains(base, "://") {
		base = p.scheme + "://" + base
	}
	c := &peerClients{
		session:   fakv1connect.NewSessionServiceClient(p.httpClient, base),
		cluster:   fakv1connect.NewClusterServiceClient(p.httpClient, base),
		runner:    fakv1connect.NewRunnerServiceClient(p.httpClient, base),
		lifecycle: fakv1connect.NewLifecycleServiceClient(p.httpClient, base),
		node:      fakv1connect.NewNodeServiceClient(p.httpClient, base),
		operator:  fakv1connect.NewOperatorServiceClient(p.httpClient, base),
		acl:       fakv1connect.NewAclServiceClient(p.httpClient, base),
	}
	p.peers[addr] = c
	return c
}

// forwardHeaders copies the caller's credentials and request id onto a
// forwarded call, so the leader logs it under the same request id.
func (s *Server) forwardHeaders(dst, src http.Header) {
	if v := src.Get("Authorization"); v != "" {
		dst.Set("Authorization", v)
	}
	if v := src.Get(HeaderRequestID); v != "" {
		dst.Set(HeaderRequestID, v)
	}
	dst.Set(headerForwarded, s.cfg.NodeName)
}

// leaderCall runs local when this node is the ready leader, otherwise
// remote against the leader's clients, retrying retryable failures until
// holdTimeout. A request that was itself forwarded is never forwarded again.
func leaderCall[T any](ctx context.Context, s *Server, hdr http.Header,
	local func(context.Context) (T, error),
	remote func(context.Context, *peerClients) (T, error),
) (T, error) {
	var zero T
	deadline := time.Now().Add(holdTimeout)
	backoff := minRetryBackoff
	forwarded := hdr.Get(headerForwarded) != ""
	var lastErr error
	for {
		if s.cluster.IsLeader() {
			v, err := local(ctx)
			if err == nil || !retryable(err) {
				return v, err
			}
			lastErr = err
		} else if forwarded {
			return zero, cluster.ErrNotLeader
		} else if _, addr := s.cluster.Leader(); addr != "" && addr != s.cfg.APIAddr {
			v, err := remote(ctx, s.peers.get(addr))
			s.metrics.forwarded.WithLabelValues(procedureOf(ctx), codeLabel(err)).Inc()
			if err == nil || !retryableRemote(ctx, err) {
				return v, err
			}
			lastErr = err
		}
		if time.Now().After(deadline) {
			if lastErr == nil {
				return zero, newError(connect.CodeUnavailable, &fakv1.ErrorInfo{Reason: ReasonNoLeader},
					"no leader elected within "+holdTimeout.String())
			}
			return zero, lastErr
		}
		select {
		case <-ctx.Done():
			return zero, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxRetryBackoff)
	}
}

// write serves a write RPC. On the ready leader it checks the session
// exists (when sessionID is set), proposes the command from build and
// converts the FSM's result; on any other node it forwards the same request
// (request id already stamped) to the leader through forward.
func write[Req, Resp any](ctx context.Context, s *Server, req *connect.Request[Req], sessionID string,
	build func() *fsmpb.Command,
	convert func(*fsmpb.Result) *Resp,
	forward func(context.Context, *peerClients, *connect.Request[Req]) (*connect.Response[Resp], error),
) (*connect.Response[Resp], error) {
	return onLeader(ctx, s, req,
		func(ctx context.Context) (*Resp, error) {
			if sessionID != "" {
				if err := s.requireSession(sessionID); err != nil {
					return nil, err
				}
			}
			res, err := s.apply(ctx, build())
			if err != nil {
				return nil, err
			}
			return convert(res), nil
		},
		forward)
}

// onLeader serves an RPC on the ready leader with local, or, on any other
// node, forwards the same request there through forward.
func onLeader[Req, Resp any](ctx context.Context, s *Server, req *connect.Request[Req],
	local func(context.Context) (*Resp, error),
	forward func(context.Context, *peerClients, *connect.Request[Req]) (*connect.Response[Resp], error),
) (*connect.Response[Resp], error) {
	resp, err := leaderCall(ctx, s, req.Header(), local,
		func(ctx context.Context, p *peerClients) (*Resp, error) {
			fwd := connect.NewRequest(req.Msg)
			s.forwardHeaders(fwd.Header(), req.Header())
			r, err := forward(ctx, p, fwd)
			if err != nil {
				return nil, err
			}
			return r.Msg, nil
		})
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(resp), nil
}

// apply proposes cmd on this (leader) node and turns a domain error in the
// result into an error.
func (s *Server) apply(ctx context.Context, cmd *fsmpb.Command) (*fsmpb.Result, error) {
	if brokenApply != nil {
		if res, err, handled := brokenApply(s, ctx, cmd); handled {
			return res, err
		}
	}
	res, err := s.cluster.Apply(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if derr := fsm.ResultError(res); derr != nil {
		return nil, derr
	}
	return res, nil
}

// readBarrier makes a read linearizable: obtain a read index from the
// leader (or this node when it leads) and wait until the local FSM has
// applied it. Stale reads skip it.
func (s *Server) readBarrier(ctx context.Context, hdr http.Header, c fakv1.ReadConsistency) error {
	if c == fakv1.ReadConsistency_READ_CONSISTENCY_STALE {
		return nil
	}
	idx, err := leaderCall(ctx, s, hdr,
		func(ctx context.Context) (uint64, error) { return s.cluster.ReadIndex(ctx) },
		func(ctx context.Context, p *peerClients) (uint64, error) {
			req := connect.NewRequest(&fakv1.ReadIndexRequest{AppliedIndex: s.fsm.AppliedIndex()})
			s.forwardHeaders(req.Header(), hdr)
			resp, err := p.cluster.ReadIndex(ctx, req)
			if err != nil {
				return 0, err
			}
			return resp.Msg.Index, nil
		})
	if err != nil {
		return err
	}
	return s.cluster.WaitApplied(ctx, idx)
}

// requireSession refuses, on the leader and before proposing, a command for a
// session that does not exist, so such requests never reach the log. The
// leader's FSM has applied every write it acknowledged, so a session whose
// creation was acknowledged is always found. Apply checks again.
func (s *Server) requireSession(id string) error {
	if _, err := s.fsm.Session(id); fsm.ReasonOf(err) == fsm.ReasonNotFound || fsm.ReasonOf(err) == fsm.ReasonInvalidArgument {
		return err
	}
	return nil
}
