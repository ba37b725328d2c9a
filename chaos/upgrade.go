package chaos

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
)

// A rolling upgrade as a run's fault phase (Config.UpgradeTo): the fleet
// starts on one build (Config.FakBin, e.g. the previous release built by
// BuildFakAt) and, under the run's load, each node in turn — followers
// first, the leader last — is stopped cleanly and started on the new
// build, the next only once it answers /v1/health/ready. The run's checkers
// then judge the whole history as for faults.

// UpgradeReport is what a rolling upgrade did.
type UpgradeReport struct {
	// Order is the nodes in the order they were upgraded.
	Order []string `json:"order"`
	// RuleVersions are the node records' rule_version before and after
	// (0: a build from before versions were advertised).
	RuleVersionsBefore map[string]uint32 `json:"rule_versions_before"`
	RuleVersionsAfter  map[string]uint32 `json:"rule_versions_after"`
	// LogStores name each node's Raft log store, read off its data dir
	// before and after: "raft-boltdb" (raft/raft.db) or "wal" (raft/wal).
	LogStoresBefore map[string]string `json:"log_stores_before"`
	LogStoresAfter  map[string]string `json:"log_stores_after"`
}

// upgrader is a fleet whose nodes can be restarted on another binary.
type upgrader interface {
	Upgrade(node, bin string) error
	// LogStore names the Raft log store in node's data dir.
	LogStore(node string) string
}

func logStores(u upgrader, nodes []string) map[string]string {
	out := map[string]string{}
	for _, n := range nodes {
		out[n] = u.LogStore(n)
	}
	return out
}

// upgradeFleet upgrades every node of f to bin, one at a time.
func upgradeFleet(ctx context.Context, f Fleet, clients map[string]*nodeClient, bin string, since func() time.Duration,
	logf func(string, ...any),
) (*UpgradeReport, []FaultEvent, error) {
	u, ok := f.(upgrader)
	if !ok {
		return nil, nil, fmt.Errorf("a %T cannot be upgraded node by node", f)
	}
	rep := &UpgradeReport{RuleVersionsBefore: ruleVersions(ctx, f, clients), LogStoresBefore: logStores(u, f.Nodes())}
	leader := findLeader(ctx, clients)
	order := slices.DeleteFunc(slices.Clone(f.Nodes()), func(n string) bool { return n == leader })
	if leader != "" {
		order = append(order, leader)
	}
	var events []FaultEvent
	for _, n := range order {
		ev := FaultEvent{Kind: "upgrade", Targets: []string{n}, Start: since()}
		logf("upgrade %s: SIGTERM, then start on %s", n, filepath.Base(bin))
		if err := u.Upgrade(n, bin); err != nil {
			return nil, nil, fmt.Errorf("upgrade %s: %w", n, err)
		}
		took, err := waitReady(ctx, f.APIAddr(n), 2*time.Minute)
		if err != nil {
			return nil, nil, fmt.Errorf("upgraded %s: %w", n, err)
		}
		ev.End, ev.Detail = since(), fmt.Sprintf("ready %s after its start", took.Round(time.Millisecond))
		logf("upgrade %s: %s", n, ev.Detail)
		events = append(events, ev)
		rep.Order = append(rep.Order, n)
	}
	// The leader commits each node's advertised version as it sees it:
	// wait for this build's (the harness is built from the tree the fleet
	// is upgraded to), not merely a version, since the API shows a record
	// without one as version 1.
	deadline := time.Now().Add(time.Minute)
	for {
		rep.RuleVersionsAfter = ruleVersions(ctx, f, clients)
		if allAt(rep.RuleVersionsAfter, f.Nodes(), fsm.RuleVersion) || time.Now().After(deadline) {
			break
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
	rep.LogStoresAfter = logStores(u, f.Nodes())
	return rep, events, nil
}

func allAt(m map[string]uint32, nodes []string, v uint32) bool {
	for _, n := range nodes {
		if m[n] != v {
			return false
		}
	}
	return true
}

// ruleVersions reads every node record's rule version through any node
// that answers.
func ruleVersions(ctx context.Context, f Fleet, clients map[string]*nodeClient) map[string]uint32 {
	for _, n := range f.Nodes() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := clients[n].node.ListNodes(cctx, connect.NewRequest(&fakv1.ListNodesRequest{}))
		cancel()
		if err != nil {
			continue
		}
		out := map[string]uint32{}
		for _, r := range resp.Msg.Nodes {
			out[r.Name] = r.RuleVersion
		}
		return out
	}
	return nil
}

// waitReady polls a node's /v1/health/ready until it answers 200.
func waitReady(ctx context.Context, addr string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	client := &http.Client{Timeout: 3 * time.Second}
	last := "no answer"
	for time.Since(start) < timeout {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/health/ready", nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start), nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return 0, ctx.Err()
		}
	}
	return 0, fmt.Errorf("not ready after %s (%s)", timeout, last)
}
