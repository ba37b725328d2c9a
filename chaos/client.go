package chaos

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

// nodeClient calls one node's API directly.
type nodeClient struct {
	name      string
	session   fakv1connect.SessionServiceClient
	cluster   fakv1connect.ClusterServiceClient
	lifecycle fakv1connect.LifecycleServiceClient
	operator  fakv1connect.OperatorServiceClient
	node      fakv1connect.NodeServiceClient
}

func newNodeClients(f Fleet, token string) map[string]*nodeClient {
	httpClient := apiclient.NewHTTPClient()
	opts := connect.WithInterceptors(apiclient.Bearer(token))
	out := make(map[string]*nodeClient)
	for _, n := range f.Nodes() {
		base := "http://" + f.APIAddr(n)
		out[n] = &nodeClient{
			name:      n,
			session:   fakv1connect.NewSessionServiceClient(httpClient, base, opts),
			cluster:   fakv1connect.NewClusterServiceClient(httpClient, base, opts),
			lifecycle: fakv1connect.NewLifecycleServiceClient(httpClient, base, opts),
			operator:  fakv1connect.NewOperatorServiceClient(httpClient, base, opts),
			node:      fakv1connect.NewNodeServiceClient(httpClient, base, opts),
		}
	}
	return out
}

// findLeader asks every node and returns the node that reports itself
// leader in the highest term ("" when none does).
func findLeader(ctx context.Context, clients map[string]*nodeClient) string {
	best, bestTerm := "", uint64(0)
	for name, c := range clients {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		resp, err := c.cluster.Status(cctx, connect.NewRequest(&fakv1.StatusRequest{}))
		cancel()
		if err != nil || len(resp.Msg.GetNodes()) == 0 {
			continue
		}
		st := resp.Msg.GetNodes()[0]
		if st.GetRaftState() == "Leader" && st.GetTerm() >= bestTerm {
			best, bestTerm = name, st.GetTerm()
		}
	}
	return best
}

// outcomeClass sorts an API error into what the client learned.
type outcomeClass int

const (
	// classUnknown: the write may or may not have happened; retry with the
	// same request id (the FSM deduplicates) or give up as Info.
	classUnknown outcomeClass = iota
	// classMismatch: a compare-and-append lost the compare (an observation).
	classMismatch
	// classRejected: the request certainly had no effect and retrying will
	// not change that (bad input, unknown session).
	classRejected
)

func classify(err error) (outcomeClass, *fakv1.ErrorInfo) {
	info := apiclient.ErrorInfo(err)
	if info != nil {
		switch info.GetReason() {
		case "SEQ_MISMATCH":
			return classMismatch, info
		case "NOT_FOUND", "INVALID_ARGUMENT", "SESSION_STOPPED", "ALREADY_EXISTS":
			return classRejected, info
		}
	}
	var ce *connect.Error
	if errors.As(err, &ce) && (ce.Code() == connect.CodeInvalidArgument || ce.Code() == connect.CodeUnauthenticated || ce.Code() == connect.CodePermissionDenied) {
		return classRejected, info
	}
	return classUnknown, info
}
