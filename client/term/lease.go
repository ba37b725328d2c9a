package term

import (
	"context"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

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
			c.out.notice("could not take the input lease again: %s", ErrorLine(err))
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
				c.notices("could not attach again: %s", ErrorLine(err))
			}
		case !transient(err):
			c.notices("keep-alive failed: %s", ErrorLine(err))
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
			c.out.notice("you no longer hold the input lease (%s); type /take to take it again", ErrorLine(err))
		}
	}
}
