//go:build fakbug_ackearly

package api

import (
	"context"
	"sync"
	"time"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// A DELIBERATELY BROKEN build (tag fakbug_ackearly): the leader acknowledges
// an append before Raft commits it. It predicts the seq from its own view
// (the FSM head plus what it has acknowledged since), answers at once, and
// applies in the background through one ordered queue. While nothing fails
// the answers are right; when the leader crashes or loses leadership,
// acknowledged appends vanish or land elsewhere. The chaos harness must
// catch it.
func init() { brokenApply = ackEarly }

type earlyAcker struct {
	mu    sync.Mutex
	acked map[string]uint64 // last seq acknowledged per session
	queue chan *fsmpb.Command
	once  sync.Once
}

var acker = &earlyAcker{acked: map[string]uint64{}, queue: make(chan *fsmpb.Command, 256)}

func ackEarly(s *Server, ctx context.Context, cmd *fsmpb.Command) (*fsmpb.Result, error, bool) {
	a := cmd.GetAppendEvents()
	if a == nil {
		return nil, nil, false
	}
	acker.once.Do(func() {
		go func() {
			for c := range acker.queue {
				actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, _ = s.cluster.Apply(actx, c)
				cancel()
			}
		}()
	})
	acker.mu.Lock()
	defer acker.mu.Unlock()
	head := acker.acked[a.SessionId]
	if sess, err := s.fsm.Session(a.SessionId); err == nil && sess.HeadSeq > head {
		head = sess.HeadSeq
	}
	if a.ExpectedSeq != nil && *a.ExpectedSeq != head {
		res := &fsmpb.Result{Error: &fsmpb.Error{Reason: string(fsm.ReasonSeqMismatch), Message: "expected head mismatch", HeadSeq: head}}
		return nil, fsm.ResultError(res), true
	}
	first := head + 1
	last := head + uint64(len(a.Events))
	acker.acked[a.SessionId] = last
	acker.queue <- cmd
	return &fsmpb.Result{Body: &fsmpb.Result_Append{Append: &fsmpb.AppendResult{SessionId: a.SessionId, FirstSeq: first, LastSeq: last}}}, nil, true
}
