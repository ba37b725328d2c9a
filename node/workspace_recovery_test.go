package node_test

import (
	"strings"
	"testing"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// After each completed turn the host has another node keep a copy of the
// workspace; when the host dies, the recovery restores the workspace from
// that copy and the journal says where it came from.
func TestWorkspaceRecoversFromItsCopy(t *testing.T) {
	agent := `cat >> notes.txt; echo >> notes.txt; echo "--"; cat notes.txt`
	c := moveFleet(t, testcluster.Options{RecoverAfter: 500 * time.Millisecond, Configure: func(name string, cfg *node.Config) {
		cfg.Runtimes = append(cfg.Runtimes, node.RuntimeConfig{Name: "notes", Adapter: node.AdapterExec, Protocol: "text",
			Command: []string{"sh", "-c", agent}})
	}})
	lost := c.Followers()[0]
	via := c.Leader()
	id := createPlaced(t, c, via, "notes", lost.Name)
	att := talk(t, c, via, id)
	for _, text := range []string{"alpha", "beta"} {
		in := actAt(t, c, via, id, att, 1, text)
		if f, evs := completedTurn(t, c, via, id, in); f["status"] != "completed" {
			t.Fatalf("turn %q: %v\n%s", text, f, transcript(evs))
		}
	}
	// The copy of the last turn is recorded.
	c.WaitFor(30*time.Second, "the workspace copy after the second turn", func() bool {
		s, err := via.Running().FSM().Session(id)
		return err == nil && s.WorkspaceCopy != nil && s.WorkspaceCopy.TurnsCompleted == 2 && s.WorkspaceCopy.Node != lost.Name
	})
	c.Stop(lost)
	c.WaitFor(60*time.Second, "the session recovered", func() bool {
		m := getMove(t, c, id)
		return m != nil && m.Cause == fsm.MoveCauseRecovery && m.State == fsm.MoveCutoverCommitted
	})
	d := describe(t, c, via, id)
	in := actAt(t, c, via, id, att, d.GetEpoch(), "gamma")
	f, evs := completedTurn(t, c, via, id, in)
	if out := transcript(evs); f["status"] != "completed" || !strings.Contains(out, "alpha") || !strings.Contains(out, "beta") {
		t.Fatalf("the turn after the recovery does not see the files of the turns before it (%v):\n%s", f, out)
	}
	said := false
	for _, ev := range readAll(t, c, via, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE) {
		if ev.Kind == fsm.KindMoveCheckpointed && strings.Contains(ev.Text, "workspace restored from the copy on") {
			said = true
		}
	}
	if !said {
		t.Fatal("the recovery's move.checkpointed does not say where the workspace came from")
	}
}
