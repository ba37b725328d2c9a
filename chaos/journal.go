package chaos

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// readJournal reads a whole journal (linearizable), page by page.
func readJournal(ctx context.Context, c *nodeClient, id string) ([]*fakv1.Event, error) {
	var evs []*fakv1.Event
	from := uint64(1)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := c.session.ReadEvents(cctx, connect.NewRequest(&fakv1.ReadEventsRequest{SessionId: id, FromSeq: from, Limit: 1000}))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", id, err)
		}
		page := resp.Msg.Events
		evs = append(evs, page...)
		if len(page) == 0 || page[len(page)-1].Seq >= resp.Msg.HeadSeq {
			return evs, nil
		}
		from = page[len(page)-1].Seq + 1
	}
}

// readValues reads a whole journal and returns the workload's values in seq
// order.
func readValues(ctx context.Context, c *nodeClient, session string, consistency fakv1.ReadConsistency) ([]string, error) {
	evs, err := readEvents(ctx, c, session, consistency)
	if err != nil {
		return nil, err
	}
	return journalOf(evs, 0).Values(), nil
}
