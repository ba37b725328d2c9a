//go:build linux

package node_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"

	"github.com/fak-dev/fak/api"
	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/internal/freeport"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/runner/proc/proctest"
	"github.com/fak-dev/fak/node/testcluster"
)

// nodeProcessEnv makes TestHelperNodeProcess run a one-node fleet: its
// value is the directory, then the API, Raft and gossip addresses.
const nodeProcessEnv = "FAK_NODE_TEST_PROCESS"

// orphanScript is the turn of the "orphans" runtime: a child in the
// background, both pids recorded in the file pids of the directory its
// argument names, then it waits for the child, 300 s.
const orphanScript = `sleep 300 & echo $$ $! > "$0/pids.tmp" && mv "$0/pids.tmp" "$0/pids"; wait`

// TestHelperNodeProcess is the node process of TestTurnDiesWithItsNode;
// run by go test, it does nothing.
func TestHelperNodeProcess(t *testing.T) {
	args := strings.Fields(os.Getenv(nodeProcessEnv))
	if len(args) != 4 {
		return
	}
	dir := args[0]
	n, err := node.Start(node.Config{
		Name: "n1", DataDir: filepath.Join(dir, "data"),
		APIAddr: args[1], RaftAddr: args[2], GossipAddr: args[3],
		BootstrapExpect: 1, Voter: true,
		Tokens: []api.Token{api.OperatorToken(testcluster.Token)},
		Runtimes: []node.RuntimeConfig{{Name: "orphans", Adapter: node.AdapterExec, Protocol: "text",
			Command: []string{"sh", "-c", orphanScript, dir}}},
		Logger: hclog.New(&hclog.LoggerOptions{Name: "n1", Level: hclog.Warn, Output: os.Stderr}),
	})
	if err != nil {
		t.Fatal(err)
	}
	<-n.Done() // until the test kills this process
}

// SIGKILL a node during a long turn: within 2 s no process of the turn is
// left, its shell (the group's leader) nor the shell's child.
func TestTurnDiesWithItsNode(t *testing.T) {
	dir := t.TempDir()
	addrs, err := freeport.Addrs(3)
	if err != nil {
		t.Fatal(err)
	}
	proc := exec.Command(os.Args[0], "-test.run=^TestHelperNodeProcess$", "-test.count=1")
	proc.Env = append(os.Environ(), nodeProcessEnv+"="+dir+" "+strings.Join(addrs, " "))
	proc.Stderr = os.Stderr
	// Dies with the test, should the test die first.
	proc.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Process.Kill(); _ = proc.Wait() })

	httpc, base, bearer := apiclient.NewHTTPClient(), "http://"+addrs[0], connect.WithInterceptors(apiclient.Bearer(testcluster.Token))
	sessions := fakv1connect.NewSessionServiceClient(httpc, base, bearer)
	nodes := fakv1connect.NewNodeServiceClient(httpc, base, bearer)
	// A session is run once the node's record, with the runtime, is
	// committed.
	proctest.WaitFor(t, "the node's record with the orphans runtime", func() bool {
		resp, err := nodes.ListNodes(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.ListNodesRequest{}))
		return err == nil && slices.ContainsFunc(resp.Msg.GetNodes(), func(n *fakv1.Node) bool {
			return n.GetName() == "n1" && slices.Contains(n.GetRuntimeAdapters(), "orphans")
		})
	})
	created, err := sessions.CreateSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.CreateSessionRequest{
		Title: "orphans", Placement: &fakv1.Placement{RuntimeAdapter: "orphans", Node: "n1"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	id := created.Msg.GetSession().GetSessionId()
	att, err := sessions.Attach(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.AttachRequest{
		SessionId: id, ClientKind: "terminal", ClientName: "t", Capabilities: []string{"input.text"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	lease := &fakv1.TakeLeaseRequest{SessionId: id, AttachmentId: att.Msg.GetAttachmentId()}
	if _, err := sessions.TakeLease(ctxT(t, 15*time.Second), connect.NewRequest(lease)); err != nil {
		t.Fatal(err)
	}
	if _, err := sessions.Act(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.ActRequest{
		SessionId: id, AttachmentId: att.Msg.GetAttachmentId(), ExpectedEpoch: 1,
		Action: &fakv1.ActRequest_Input{Input: &fakv1.InputText{Text: "run long"}},
	})); err != nil {
		t.Fatal(err)
	}
	pids := proctest.ReadPids(t, filepath.Join(dir, "pids"))
	t.Cleanup(func() { _ = syscall.Kill(-pids[0], syscall.SIGKILL) }) // whatever outlived a failed test

	killed := time.Now()
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait()
	deadline := killed.Add(2 * time.Second)
	for _, pid := range pids {
		for !proctest.Gone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d of the turn outlived its node by 2s", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t.Logf("the turn's %d processes were gone %s after the node's SIGKILL", len(pids), time.Since(killed).Round(time.Millisecond))
}
