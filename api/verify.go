package api

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/fsm"
)

// VerifyReplay: each node checks its own replica (cluster.VerifyReplay), so
// unlike the other OperatorService calls it is never relayed to the
// leader. A request naming another node is relayed to that node once
// (Fak-Forwarded-By stops a second hop); all = true asks every Raft peer,
// concurrently, and reports an unreachable one in its row.

// ReasonReplayBusy: a replay check is already running on that node.
const ReasonReplayBusy = "REPLAY_CHECK_RUNNING"

func (h *operatorHandler) VerifyReplay(ctx context.Context, req *connect.Request[fakv1.VerifyReplayRequest]) (*connect.Response[fakv1.VerifyReplayResponse], error) {
	s := h.s
	node := req.Msg.GetNode()
	switch {
	case req.Msg.GetAll() && node != "":
		return nil, invalidArgument("node and all are exclusive")
	case req.Msg.GetAll():
		return connect.NewResponse(&fakv1.VerifyReplayResponse{Nodes: s.verifyAll(ctx, req)}), nil
	}
	var check *fakv1.ReplayCheck
	var err error
	if node == "" || node == s.cfg.NodeName {
		check, err = s.verifyLocal(ctx)
	} else {
		check, err = s.verifyRemote(ctx, req, node)
	}
	if err != nil {
		return nil, verifyError(err)
	}
	return connect.NewResponse(&fakv1.VerifyReplayResponse{Nodes: []*fakv1.ReplayCheck{check}}), nil
}

func (s *Server) verifyLocal(ctx context.Context) (*fakv1.ReplayCheck, error) {
	rep, err := s.cluster.VerifyReplay(ctx)
	if err != nil {
		return nil, err
	}
	return replayCheckToAPI(rep), nil
}

// verifyRemote relays the check to node, found by name in gossip.
func (s *Server) verifyRemote(ctx context.Context, req *connect.Request[fakv1.VerifyReplayRequest], node string) (*fakv1.ReplayCheck, error) {
	if req.Header().Get(headerForwarded) != "" {
		// A stale gossip address reached the wrong node; no second hop.
		return nil, connect.NewError(connect.CodeFailedPrecondition,
			fmt.Errorf("relayed to %s, but this node is %s", node, s.cfg.NodeName))
	}
	var addr string
	for _, m := range s.cluster.Members() {
		if m.Name != node {
			continue
		}
		if m.Status != cluster.StatusAlive || m.Meta.APIAddr == "" {
			return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("node %s is %s", node, m.Status))
		}
		addr = m.Meta.APIAddr
	}
	if addr == "" {
		return nil, newError(connect.CodeNotFound, &fakv1.ErrorInfo{Reason: ReasonNotFound},
			fmt.Sprintf("node %s is not a member (fakctl cluster members lists them)", node))
	}
	fwd := connect.NewRequest(&fakv1.VerifyReplayRequest{Node: node})
	s.forwardHeaders(fwd.Header(), req.Header())
	resp, err := s.peers.get(addr).operator.VerifyReplay(ctx, fwd)
	if err != nil {
		return nil, err
	}
	if len(resp.Msg.GetNodes()) != 1 {
		return nil, fmt.Errorf("node %s answered %d checks", node, len(resp.Msg.GetNodes()))
	}
	return resp.Msg.GetNodes()[0], nil
}

// verifyAll checks every server of the Raft configuration (the replicas),
// in configuration order.
func (s *Server) verifyAll(ctx context.Context, req *connect.Request[fakv1.VerifyReplayRequest]) []*fakv1.ReplayCheck {
	peers, err := s.cluster.Peers()
	if err != nil {
		return []*fakv1.ReplayCheck{{Node: s.cfg.NodeName, Error: "raft configuration: " + err.Error()}}
	}
	out := make([]*fakv1.ReplayCheck, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Go(func() {
			var check *fakv1.ReplayCheck
			var err error
			if p.ID == s.cfg.NodeName {
				check, err = s.verifyLocal(ctx)
			} else {
				check, err = s.verifyRemote(ctx, req, p.ID)
			}
			if err != nil {
				check = &fakv1.ReplayCheck{Node: p.ID, Error: errorText(verifyError(err))}
			}
			out[i] = check
		})
	}
	wg.Wait()
	return out
}

// errorText is an error as a row shows it: the fak reason when there is
// one, then the message.
func errorText(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err.Error()
	}
	if info := apiclient.ErrorInfo(ce); info.GetReason() != "" {
		return info.GetReason() + ": " + ce.Message()
	}
	return ce.Message()
}

func verifyError(err error) error {
	if errors.Is(err, cluster.ErrReplayBusy) {
		return newError(connect.CodeFailedPrecondition, &fakv1.ErrorInfo{Reason: ReasonReplayBusy}, err.Error())
	}
	return toConnectError(err)
}

func replayCheckToAPI(r *cluster.ReplayReport) *fakv1.ReplayCheck {
	out := &fakv1.ReplayCheck{
		Node: r.Node, LiveIndex: r.LiveIndex, LiveDigest: r.LiveDigest,
		Equal: r.Equal, LogOnlySkipped: r.LogOnlySkipped,
	}
	for _, b := range r.Rebuilds {
		rb := &fakv1.ReplayRebuild{
			Source: b.Source, SnapshotId: b.SnapshotID, SnapshotIndex: b.SnapshotIndex,
			FirstIndex: b.FirstIndex, LastIndex: b.LastIndex, Entries: b.Entries,
			Digest: b.Digest, Equal: b.Equal, DurationMs: b.Duration.Milliseconds(),
		}
		for _, d := range b.Differences {
			rb.Differences = append(rb.Differences, &fakv1.BucketDifference{Bucket: d.Bucket, LiveKeys: d.Keys, RebuiltKeys: d.OtherKeys})
		}
		if d := b.FirstDiff; d != nil {
			kind := d.Kind
			switch d.Kind {
			case fsm.DiffOnlyThis:
				kind = "only in the live state"
			case fsm.DiffOnlyOther:
				kind = "only in the rebuilt state"
			}
			rb.FirstDifference = &fakv1.KeyDifference{Bucket: d.Bucket, Key: d.Key, Kind: kind}
		}
		out.Rebuilds = append(out.Rebuilds, rb)
	}
	return out
}
