package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// Raft configuration changes by hand (OperatorService), served by the
// leader whichever node --addr names.

// transferTimeout bounds a leadership transfer: Raft's own election
// timeout plus the wait for the new leader to be known.
const transferTimeout = 30 * time.Second

func operatorRaftRemovePeerCommand(fs *flag.FlagSet) runFunc {
	id := fs.String("id", "", "`NAME` of the server to remove (as \"fakctl cluster peers\" lists it)")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *id == "" {
			return usageErrorf("--id is required")
		}
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.operatorClient().RaftRemovePeer(ctx, connect.NewRequest(&fakv1.RaftRemovePeerRequest{Id: *id}))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg)
		}
		_, err = fmt.Fprintf(c.stdout, "Removed %s from the Raft configuration\n", *id)
		return err
	}
}

func operatorRaftTransferLeaderCommand(fs *flag.FlagSet) runFunc {
	to := fs.String("to", "", "`NAME` of the voter to hand leadership to (default: a voter Raft picks)")
	return func(ctx context.Context, c *cli, _ []string) error {
		ctx, cancel := context.WithTimeout(ctx, transferTimeout)
		defer cancel()
		resp, err := c.operatorClient().RaftTransferLeader(ctx, connect.NewRequest(&fakv1.RaftTransferLeaderRequest{To: *to}))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg)
		}
		_, err = fmt.Fprintf(c.stdout, "Leader is now %s\n", resp.Msg.GetLeader())
		return err
	}
}
