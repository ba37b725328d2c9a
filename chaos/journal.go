package chaos

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/chaos/checker"
)

// pageTimeout bounds one page of a journal read.
const pageTimeout = 10 * time.Second

// readJournal reads a whole journal linearizably.
func readJournal(ctx context.Context, c *nodeClient, id string) ([]*fakv1.Event, error) {
	evs, err := readEvents(ctx, c, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", id, err)
	}
	return evs, nil
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

// readEvents reads a whole journal. Pages after the first are read at the
// same or a later state, so they use the same consistency; a journal is
// append-only, so the pages join into one prefix-consistent view ending at
// the last page's head.
func readEvents(ctx context.Context, c *nodeClient, session string, consistency fakv1.ReadConsistency) ([]*fakv1.Event, error) {
	var out []*fakv1.Event
	from := uint64(1)
	for {
		pctx, cancel := context.WithTimeout(ctx, pageTimeout)
		resp, err := c.session.ReadEvents(pctx, connect.NewRequest(&fakv1.ReadEventsRequest{
			SessionId: session, FromSeq: from, Limit: 1000, Consistency: consistency,
		}))
		cancel()
		if err != nil {
			return nil, err
		}
		evs := resp.Msg.GetEvents()
		out = append(out, evs...)
		if len(evs) == 0 || evs[len(evs)-1].GetSeq() >= resp.Msg.GetHeadSeq() {
			return out, nil
		}
		from = evs[len(evs)-1].GetSeq() + 1
	}
}

// journalOf is a workload session's journal after its opening events (seq
// base), numbered from 1 as the history numbers it. Events of chaosKind are
// the workload's values; any other kind was written by the fleet itself (a
// recovery move, say).
func journalOf(evs []*fakv1.Event, base uint64) checker.Journal {
	var j checker.Journal
	for _, e := range evs {
		if e.GetSeq() <= base {
			continue
		}
		j.Events = append(j.Events, checker.Event{
			Seq: e.GetSeq() - base, Kind: e.GetKind(), Text: e.GetText(), Value: e.GetKind() == chaosKind,
		})
	}
	return j
}
