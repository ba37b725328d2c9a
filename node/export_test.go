package node

import (
	"context"
	"time"
)

// RetainNow runs one retention pass as the leader would at now.
func (n *Node) RetainNow(now time.Time) int { return n.retain(context.Background(), now) }
