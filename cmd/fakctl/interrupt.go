package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/client/journal"
)

// session interrupt (DESIGN.md §7): interrupting a turn is the input lease
// holder's, so fakctl becomes a client for one interrupt: it attaches,
// takes the lease, acts, and detaches (which releases the lease), leaving
// an attachment.joined, a lease.taken and an attachment.left around the
// turn.completed that names it.

// interruptClientKind is the client kind fakctl attaches as.
const interruptClientKind = "fakctl"

// detachTimeout bounds the detach after an interrupt, which runs even when
// the command was cut short.
const detachTimeout = 5 * time.Second

func sessionInterruptCommand(fs *flag.FlagSet) runFunc {
	steal := fs.Bool("steal", false, "take the input lease from the client holding it (default: a lease held by another client is an error)")
	return func(ctx context.Context, c *cli, args []string) error {
		id := args[0]
		client := c.sessionClient()
		callCtx, cancel := unaryContext(ctx)
		att, err := client.Attach(callCtx, connect.NewRequest(&fakv1.AttachRequest{
			SessionId: id, ClientKind: interruptClientKind, ClientName: apiclient.ClientName(os.Getenv), Capabilities: []string{"turn.interrupt"},
		}))
		cancel()
		if err != nil {
			return err
		}
		attachment := att.Msg.GetAttachmentId()
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), detachTimeout)
			defer cancel()
			_, _ = client.Detach(dctx, connect.NewRequest(&fakv1.DetachRequest{SessionId: id, AttachmentId: attachment}))
		}()

		callCtx, cancel = unaryContext(ctx)
		_, err = client.TakeLease(callCtx, connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: id, AttachmentId: attachment, Steal: *steal}))
		cancel()
		if err != nil {
			if reasonOf(err) == "LEASE_HELD" {
				return fmt.Errorf("the input lease of %s is held by %s; rerun with --steal to take it", id, currentHolder(ctx, client, id))
			}
			return err
		}

		epoch := att.Msg.GetDescriptor_().GetSession().GetEpoch()
		act := func() (*fakv1.ActResponse, error) {
			callCtx, cancel := unaryContext(ctx)
			defer cancel()
			r, err := client.Act(callCtx, connect.NewRequest(&fakv1.ActRequest{
				SessionId: id, AttachmentId: attachment, ExpectedEpoch: epoch,
				Action: &fakv1.ActRequest_Interrupt{Interrupt: &fakv1.InterruptTurn{}},
			}))
			if err != nil {
				return nil, err
			}
			return r.Msg, nil
		}
		resp, err := act()
		if reasonOf(err) == "STALE_EPOCH" {
			// The session moved (or was refreshed) since the attach.
			callCtx, cancel := unaryContext(ctx)
			d, derr := client.DescribeSession(callCtx, connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
			cancel()
			if derr == nil {
				epoch = d.Msg.GetSession().GetEpoch()
				resp, err = act()
			}
		}
		if err != nil {
			return err
		}
		ev, err := eventAt(ctx, client, id, resp.GetSeq())
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, ev)
		}
		_, err = fmt.Fprintf(c.stdout, "Interrupted %s: #%d %s\n", id, ev.GetSeq(), escapeText(journal.Summary(ev)))
		return err
	}
}

// eventAt reads the event at seq of session id.
func eventAt(ctx context.Context, client fakv1connect.SessionServiceClient, id string, seq uint64) (*fakv1.Event, error) {
	ctx, cancel := unaryContext(ctx)
	defer cancel()
	r, err := client.ReadEvents(ctx, connect.NewRequest(&fakv1.ReadEventsRequest{SessionId: id, FromSeq: seq, Limit: 1}))
	if err != nil {
		return nil, err
	}
	if evs := r.Msg.GetEvents(); len(evs) == 1 && evs[0].GetSeq() == seq {
		return evs[0], nil
	}
	return nil, fmt.Errorf("event #%d of %s not found", seq, id)
}

// currentHolder names the holder of a session's input lease ("browser bob"),
// or "another client" when the session cannot be described.
func currentHolder(ctx context.Context, client fakv1connect.SessionServiceClient, id string) string {
	ctx, cancel := unaryContext(ctx)
	defer cancel()
	d, err := client.DescribeSession(ctx, connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
	if err != nil {
		return "another client"
	}
	l := d.Msg.GetSession().GetLease()
	return clientLabel(l.GetClientKind(), l.GetClientName(), l.GetAttachmentId())
}

// reasonOf is the fak reason of an RPC error, or "".
func reasonOf(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return errorInfo(ce).GetReason()
	}
	return ""
}
