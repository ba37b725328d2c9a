package term

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

const (
	// rpcTimeout bounds each unary call; streams have no deadline.
	rpcTimeout = 10 * time.Second
	// Watch reconnects: at most maxWatchFailures attempts in a row without
	// progress, with a backoff doubling from the first delay to the last.
	maxWatchFailures  = 30
	firstRetryDelay   = 100 * time.Millisecond
	maxRetryDelay     = 3 * time.Second
	detachTimeout     = 5 * time.Second
	minRenewInterval  = 200 * time.Millisecond
	minKeepAliveEvery = time.Second
)

// Error reasons (fak.v1.ErrorInfo) the client branches on.
const (
	reasonNotFound           = "NOT_FOUND"
	reasonLeaseHeld          = "LEASE_HELD"
	reasonLeaseNotHeld       = "LEASE_NOT_HELD"
	reasonStaleEpoch         = "STALE_EPOCH"
	reasonSessionStopped     = "SESSION_STOPPED"
	reasonAttachmentNotFound = "ATTACHMENT_NOT_FOUND"
)

// normalizeAPIAddr is apiclient.NormalizeAddr with scheme used when addr
// has none (an endpoint of a fleet reached over https is https too).
func normalizeAPIAddr(addr, scheme string) (string, error) {
	if trimmed := strings.TrimSpace(addr); trimmed != "" && !strings.Contains(trimmed, "://") {
		addr = scheme + "://" + trimmed
	}
	return apiclient.NormalizeAddr(addr)
}

// reasonOf returns the machine-readable reason of a fak error, or "".
func reasonOf(err error) string {
	if info := apiclient.ErrorInfo(err); info != nil {
		return info.GetReason()
	}
	return ""
}

// ErrorLine describes err on one line: "REASON: message" for a fak error.
func ErrorLine(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg := err.Error()
		prefix, wrapped := strings.CutSuffix(msg, ce.Error())
		if !wrapped {
			prefix = ""
		}
		if r := reasonOf(err); r != "" {
			msg = prefix + r
			if m := ce.Message(); m != "" {
				msg += ": " + m
			}
			return singleLine(msg)
		}
	}
	return singleLine(err.Error())
}

// transient reports whether a failed call may succeed on a retry or on
// another node: the node went away, the connection broke, or the fleet had
// no leader for a moment.
func transient(err error) bool {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return false
	}
	switch ce.Code() {
	case connect.CodeUnavailable, connect.CodeUnknown, connect.CodeInternal,
		connect.CodeCanceled, connect.CodeDeadlineExceeded, connect.CodeAborted:
		return true
	}
	return false
}

// sessionConn is the client's binding to one session: the endpoints that
// can serve it (any node; endpoints are never identity), the current one,
// and the attachment. Its methods are safe for concurrent use by the input
// loop, the watch and the keep-alive goroutines.
type sessionConn struct {
	httpClient *http.Client
	clientOpts []connect.ClientOption
	scheme     string
	sessionID  string
	kind, name string
	caps       []string
	out        *transcript
	notices    func(format string, args ...any) // connection remarks (stderr)

	mu        sync.Mutex
	endpoints []string // base URLs; the current one first
	clients   map[string]fakv1connect.SessionServiceClient
	attachID  string
	self      map[string]bool // every attachment id this client had
	wantLease bool            // this client holds (and renews) the input lease
	keepAlive time.Duration
	leaseTTL  time.Duration
}

// forSession is a connection to another session through the same
// endpoints and clients, not attached yet.
func (c *sessionConn) forSession(id string) *sessionConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := &sessionConn{
		httpClient: c.httpClient, clientOpts: c.clientOpts, scheme: c.scheme,
		sessionID: id, kind: c.kind, name: c.name, caps: c.caps, out: c.out, notices: c.notices,
		endpoints: append([]string(nil), c.endpoints...), clients: make(map[string]fakv1connect.SessionServiceClient, len(c.clients)),
		self: make(map[string]bool), keepAlive: c.keepAlive, leaseTTL: c.leaseTTL,
	}
	for base, cl := range c.clients {
		n.clients[base] = cl
	}
	return n
}

func (c *sessionConn) client(base string) fakv1connect.SessionServiceClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[base]; ok {
		return cl
	}
	cl := fakv1connect.NewSessionServiceClient(c.httpClient, base, c.clientOpts...)
	c.clients[base] = cl
	return cl
}

func (c *sessionConn) current() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.endpoints[0]
}

func (c *sessionConn) attachment() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attachID
}

// isSelf reports whether an attachment id is (or was) this client's.
func (c *sessionConn) isSelf(attachmentID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return attachmentID != "" && c.self[attachmentID]
}

// use makes base the current endpoint.
func (c *sessionConn) use(base string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	eps := []string{base}
	for _, e := range c.endpoints {
		if e != base {
			eps = append(eps, e)
		}
	}
	c.endpoints = eps
}

// call runs one unary RPC on the current endpoint and, when that fails
// transiently, once on each other known endpoint; the first that answers
// becomes current. Writes are safe to repeat: Act carries a request id,
// and the other writes are idempotent in effect.
func (c *sessionConn) call(ctx context.Context, fn func(context.Context, fakv1connect.SessionServiceClient) error) error {
	c.mu.Lock()
	eps := append([]string(nil), c.endpoints...)
	c.mu.Unlock()
	var err error
	for i, base := range eps {
		cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		err = fn(cctx, c.client(base))
		cancel()
		if err == nil {
			if i > 0 {
				c.use(base)
			}
			return nil
		}
		if ctx.Err() != nil || !transient(err) {
			return err
		}
	}
	return err
}

// discover refreshes the endpoint list from DiscoverSession: the current
// endpoint stays first when it is still listed, then alive nodes in the
// server's order (compute node first), then the rest.
func (c *sessionConn) discover(ctx context.Context) error {
	var resp *fakv1.DiscoverSessionResponse
	err := c.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
		r, err := cl.DiscoverSession(ctx, connect.NewRequest(&fakv1.DiscoverSessionRequest{SessionId: c.sessionID}))
		if err == nil {
			resp = r.Msg
		}
		return err
	})
	if err != nil {
		return err
	}
	var alive, others []string
	for _, ep := range resp.GetEndpoints() {
		base, err := normalizeAPIAddr(ep.GetApiAddr(), c.scheme)
		if err != nil {
			continue
		}
		if ep.GetStatus() == "" || ep.GetStatus() == "alive" {
			alive = append(alive, base)
		} else {
			others = append(others, base)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	var eps []string
	for _, e := range append(append([]string{c.endpoints[0]}, alive...), append(others, c.endpoints...)...) {
		if !seen[e] {
			seen[e] = true
			eps = append(eps, e)
		}
	}
	c.endpoints = eps
	return nil
}

// rotate moves the current endpoint to the end of the list, so the next
// attempt goes to another node, and returns the new current one.
func (c *sessionConn) rotate() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.endpoints) > 1 {
		c.endpoints = append(c.endpoints[1:], c.endpoints[0])
	}
	return c.endpoints[0]
}

func (c *sessionConn) describe(ctx context.Context, attachmentID string) (*fakv1.DescribeSessionResponse, error) {
	var d *fakv1.DescribeSessionResponse
	err := c.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
		r, err := cl.DescribeSession(ctx, connect.NewRequest(&fakv1.DescribeSessionRequest{
			SessionId: c.sessionID, AttachmentId: attachmentID,
		}))
		if err == nil {
			d = r.Msg
		}
		return err
	})
	return d, err
}

// attach registers a new attachment and makes it current.
func (c *sessionConn) attach(ctx context.Context) (*fakv1.AttachResponse, error) {
	var resp *fakv1.AttachResponse
	err := c.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
		r, err := cl.Attach(ctx, connect.NewRequest(&fakv1.AttachRequest{
			SessionId: c.sessionID, ClientKind: c.kind, ClientName: c.name, Capabilities: c.caps,
		}))
		if err == nil {
			resp = r.Msg
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.attachID = resp.GetAttachmentId()
	c.self[c.attachID] = true
	c.keepAlive = max(time.Duration(resp.GetKeepaliveMs())*time.Millisecond, minKeepAliveEvery)
	c.mu.Unlock()
	c.out.addSelf(resp.GetAttachmentId())
	return resp, nil
}

// act submits one input against the expected epoch. requestID makes a
// retry on another node a duplicate the fleet recognizes.
func (c *sessionConn) act(ctx context.Context, text string, epoch uint64, requestID string) (uint64, error) {
	return c.actOn(ctx, &fakv1.ActRequest{Action: &fakv1.ActRequest_Input{Input: &fakv1.InputText{Text: text}}, ExpectedEpoch: epoch, RequestId: requestID})
}

// interrupt interrupts the running turn; the seq is its turn.completed's.
func (c *sessionConn) interrupt(ctx context.Context, epoch uint64, requestID string) (uint64, error) {
	return c.actOn(ctx, &fakv1.ActRequest{Action: &fakv1.ActRequest_Interrupt{Interrupt: &fakv1.InterruptTurn{}}, ExpectedEpoch: epoch, RequestId: requestID})
}

// actOn sends req (its action, epoch and request id) as this attachment.
func (c *sessionConn) actOn(ctx context.Context, req *fakv1.ActRequest) (uint64, error) {
	var seq uint64
	req.SessionId, req.AttachmentId = c.sessionID, c.attachment()
	err := c.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
		r, err := cl.Act(ctx, connect.NewRequest(req))
		if err == nil {
			seq = r.Msg.GetSeq()
		}
		return err
	})
	return seq, err
}

func (c *sessionConn) answer(ctx context.Context, approvalSeq uint64, approved bool, note string) (*fakv1.AnswerApprovalResponse, error) {
	var resp *fakv1.AnswerApprovalResponse
	id := c.attachment()
	err := c.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
		r, err := cl.AnswerApproval(ctx, connect.NewRequest(&fakv1.AnswerApprovalRequest{
			SessionId: c.sessionID, AttachmentId: id, ApprovalSeq: approvalSeq, Approved: approved, Note: note,
		}))
		if err == nil {
			resp = r.Msg
		}
		return err
	})
	return resp, err
}

// detach ends the attachment (the fleet releases its lease with it). It
// runs on its own deadline: the client may be leaving because its context
// was cancelled.
func (c *sessionConn) detach() error {
	id := c.attachment()
	if id == "" {
		return nil
	}
	c.setLease(false)
	ctx, cancel := context.WithTimeout(context.Background(), detachTimeout)
	defer cancel()
	return c.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
		_, err := cl.Detach(ctx, connect.NewRequest(&fakv1.DetachRequest{SessionId: c.sessionID, AttachmentId: id}))
		return err
	})
}
