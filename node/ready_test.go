package node_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/fak-dev/fak/node/testcluster"
)

func getReady(t *testing.T, n *testcluster.Node) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get("http://" + n.APIAddr + "/v1/health/ready")
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("ready of %s: %v", n.Name, err)
	}
	return resp.StatusCode, body
}

// GET /v1/health/ready is 200 "ready" on every node once a leader exists and
// the node has applied the leader's index, and 503 "no leader" on a
// node left without a quorum.
func TestHealthReady(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	leader := c.WaitForLeader(10 * time.Second)
	createSession(t, c, leader, "ready")
	for _, n := range c.Nodes {
		var code int
		var body map[string]any
		c.WaitFor(10*time.Second, n.Name+" ready", func() bool {
			code, body = getReady(t, n)
			return code == http.StatusOK
		})
		if body["status"] != "ready" || body["node"] != n.Name || body["leader"] != leader.Name ||
			body["applied_index"].(float64) < body["commit_index"].(float64) {
			t.Fatalf("ready of %s: HTTP %d %v", n.Name, code, body)
		}
	}
	last := c.Followers()[0]
	for _, n := range c.Nodes {
		if n != last {
			c.Stop(n)
		}
	}
	c.WaitFor(20*time.Second, last.Name+" not ready without a leader", func() bool {
		code, body := getReady(t, last)
		return code == http.StatusServiceUnavailable && body["status"] == "no leader"
	})
}
