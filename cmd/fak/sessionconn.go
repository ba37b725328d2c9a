package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
	defaultAPIAddr = apiclient.DefaultAddr
	// devTokenFile is where `fak dev` writes its token, relative to the
	// directory it runs in.
	devTokenFile = apiclient.DevTokenFile
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

// resolveAPIAddr picks the node address: the flag, then FAK_ADDR, then the
// default of a local dev fleet, normalized to a base URL.
func resolveAPIAddr(flagAddr string, getenv func(string) string) (string, error) {
	return apiclient.ResolveAddr(flagAddr, getenv)
}

// resolveAPIToken picks the token, first found wins: the flag, FAK_TOKEN,
// the file named by FAK_TOKEN_FILE (which must exist), then the dev fleet's
// token file under workDir (optional: a fleet may run without tokens).
func resolveAPIToken(flagToken string, getenv func(string) string, workDir string) (string, error) {
	return apiclient.ResolveToken(flagToken, getenv, workDir)
}

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

// errorLine describes err on one line: "REASON: message" for a fak error.
func errorLine(err error) string {
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

func (c *sessionConn) holdsLease() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wantLease
}

func (c *sessionConn) setLease(held bool) {
	c.mu.Lock()
	c.wantLease = held
	c.mu.Unlock()
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

// reattach replaces an attachment that expired (stale is the id found
// gone; nothing happens when it was already replaced) and takes the lease
// again if this client held it.
func (c *sessionConn) reattach(ctx context.Context, stale string) error {
	c.mu.Lock()
	if c.attachID != stale {
		c.mu.Unlock()
		return nil
	}
	hadLease := c.wantLease
	c.wantLease = false
	c.mu.Unlock()
	resp, err := c.attach(ctx)
	if err != nil {
		return err
	}
	c.out.notice("attachment %s expired; attached again as %s", stale, resp.GetAttachmentId())
	if hadLease {
		if _, err := c.takeLease(ctx, false); err != nil {
			c.out.notice("could not take the input lease again: %s", errorLine(err))
		} else {
			c.out.notice("took the input lease again")
		}
	}
	return nil
}

func (c *sessionConn) takeLease(ctx context.Context, steal bool) (*fakv1.TakeLeaseResponse, error) {
	var resp *fakv1.TakeLeaseResponse
	id := c.attachment()
	err := c.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
		r, err := cl.TakeLease(ctx, connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: c.sessionID, AttachmentId: id, Steal: steal}))
		if err == nil {
			resp = r.Msg
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.wantLease = true
	if ttl := time.Duration(resp.GetTtlMs()) * time.Millisecond; ttl > 0 {
		c.leaseTTL = ttl
	}
	c.mu.Unlock()
	return resp, nil
}

func (c *sessionConn) releaseLease(ctx context.Context) (*fakv1.ReleaseLeaseResponse, error) {
	c.setLease(false)
	var resp *fakv1.ReleaseLeaseResponse
	id := c.attachment()
	err := c.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
		r, err := cl.ReleaseLease(ctx, connect.NewRequest(&fakv1.ReleaseLeaseRequest{SessionId: c.sessionID, AttachmentId: id}))
		if err == nil {
			resp = r.Msg
		}
		return err
	})
	return resp, err
}

// act submits one input against the expected epoch. requestID makes a
// retry on another node a duplicate the fleet recognizes.
func (c *sessionConn) act(ctx context.Context, text string, epoch uint64, requestID string) (uint64, error) {
	var seq uint64
	id := c.attachment()
	err := c.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
		r, err := cl.Act(ctx, connect.NewRequest(&fakv1.ActRequest{
			SessionId: c.sessionID, AttachmentId: id, ExpectedEpoch: epoch,
			Action: &fakv1.ActRequest_Input{Input: &fakv1.InputText{Text: text}}, RequestId: requestID,
		}))
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

// keepAliveLoop renews the attachment every keepalive interval until ctx
// ends, attaching again if it expired meanwhile (a suspended laptop).
func (c *sessionConn) keepAliveLoop(ctx context.Context) {
	for {
		c.mu.Lock()
		every := c.keepAlive
		c.mu.Unlock()
		if !sleepCtx(ctx, every) {
			return
		}
		id := c.attachment()
		err := c.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
			_, err := cl.KeepAlive(ctx, connect.NewRequest(&fakv1.KeepAliveRequest{SessionId: c.sessionID, AttachmentId: id}))
			return err
		})
		switch {
		case err == nil || ctx.Err() != nil:
		case reasonOf(err) == reasonAttachmentNotFound:
			if err := c.reattach(ctx, id); err != nil && ctx.Err() == nil {
				c.notices("could not attach again: %s", errorLine(err))
			}
		case !transient(err):
			c.notices("keep-alive failed: %s", errorLine(err))
		}
	}
}

// renewLoop renews the input lease every third of its TTL while this client
// holds it. Losing it (stolen, expired) ends the renewals until the lease is
// taken again.
func (c *sessionConn) renewLoop(ctx context.Context) {
	for {
		c.mu.Lock()
		every := max(c.leaseTTL/3, minRenewInterval)
		c.mu.Unlock()
		if !sleepCtx(ctx, every) {
			return
		}
		if !c.holdsLease() {
			continue
		}
		id := c.attachment()
		err := c.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
			_, err := cl.RenewLease(ctx, connect.NewRequest(&fakv1.RenewLeaseRequest{SessionId: c.sessionID, AttachmentId: id}))
			return err
		})
		if err == nil || ctx.Err() != nil || transient(err) {
			continue
		}
		c.mu.Lock()
		lost := c.wantLease && c.attachID == id
		if lost {
			c.wantLease = false
		}
		c.mu.Unlock()
		if lost {
			c.out.notice("you no longer hold the input lease (%s); type /take to take it again", errorLine(err))
		}
	}
}

// watchResult is what the watch goroutine hands the input loop: a batch of
// events in journal order, or the error that ended the watch for good.
type watchResult struct {
	events []*fakv1.Event
	err    error
}

// watch streams the events after after, with this client's attachment,
// until ctx ends. When the stream breaks it reconnects, through another
// node when it can, resuming after the last event it delivered: nothing is
// skipped and nothing is delivered twice.
func (c *sessionConn) watch(ctx context.Context, after uint64, out chan<- watchResult) {
	failures := 0
	for {
		id := c.attachment()
		progressed, err := c.watchOnce(ctx, id, &after, out)
		if ctx.Err() != nil {
			return
		}
		if progressed {
			failures = 0
		}
		switch {
		case err == nil:
			// The server ended the stream (a node shutting down): resume.
		case reasonOf(err) == reasonAttachmentNotFound:
			if rerr := c.reattach(ctx, id); rerr != nil && !transient(rerr) {
				sendResult(ctx, out, watchResult{err: rerr})
				return
			}
		case !transient(err):
			sendResult(ctx, out, watchResult{err: err})
			return
		}
		failures++
		if failures > maxWatchFailures {
			sendResult(ctx, out, watchResult{err: fmt.Errorf("gave up watching after %d failed reconnects: %w", maxWatchFailures, err)})
			return
		}
		reason := "stream ended"
		if err != nil {
			reason = errorLine(err)
		}
		if !sleepCtx(ctx, retryDelay(failures)) {
			return
		}
		if failures > 1 || err != nil {
			c.rotate()
		}
		if derr := c.discover(ctx); derr != nil && ctx.Err() == nil {
			c.rotate()
		}
		c.notices("watch interrupted (%s); resuming after #%d via %s", reason, after, c.current())
	}
}

func (c *sessionConn) watchOnce(ctx context.Context, attachmentID string, after *uint64, out chan<- watchResult) (progressed bool, err error) {
	stream, err := c.client(c.current()).WatchEvents(ctx, connect.NewRequest(&fakv1.WatchEventsRequest{
		SessionId: c.sessionID, AfterSeq: *after, AttachmentId: attachmentID,
	}))
	if err != nil {
		return false, err
	}
	defer stream.Close()
	for stream.Receive() {
		var batch []*fakv1.Event
		for _, ev := range stream.Msg().GetEvents() {
			if ev.GetSeq() <= *after {
				continue // delivered before a reconnect
			}
			batch = append(batch, ev)
			*after = ev.GetSeq()
		}
		if len(batch) == 0 {
			continue // a heartbeat
		}
		if !sendResult(ctx, out, watchResult{events: batch}) {
			return progressed, nil
		}
		progressed = true
	}
	return progressed, stream.Err()
}

func sendResult(ctx context.Context, out chan<- watchResult, r watchResult) bool {
	select {
	case out <- r:
		return true
	case <-ctx.Done():
		return false
	}
}

// retryDelay is the exponential backoff, with jitter, before attempt n.
func retryDelay(n int) time.Duration {
	d := min(firstRetryDelay<<min(n-1, 10), maxRetryDelay)
	return d/2 + rand.N(d/2+1)
}

// sleepCtx waits for d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
