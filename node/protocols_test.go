package node_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/node/testcluster"
)

// One port serves the Connect, gRPC and gRPC-Web protocols, the gRPC health
// service and a plain JSON health endpoint.
func TestCluster_ProtocolsAndHealth(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	f := c.Followers()[0]
	id := createSession(t, c, c.Leader(), "protocols")

	for name, opt := range map[string]connect.ClientOption{
		"grpc":     connect.WithGRPC(),
		"grpc-web": connect.WithGRPCWeb(),
		"connect":  connect.WithProtoJSON(),
	} {
		cl := fakv1connect.NewSessionServiceClient(c.HTTPClient(), "http://"+f.APIAddr, opt,
			connect.WithInterceptors(apiclient.Bearer(testcluster.Token)))
		resp, err := cl.AppendEvents(ctxT(t, 10*time.Second), connect.NewRequest(&fakv1.AppendEventsRequest{
			SessionId: id, Events: []*fakv1.EventInput{{Kind: "note", Text: name}},
		}))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if resp.Msg.LastSeq < 3 {
			t.Fatalf("%s: seq %d", name, resp.Msg.LastSeq)
		}
	}

	resp, err := http.Get("http://" + f.APIAddr + "/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	var health map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&health); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || health["status"] != "ok" || health["leader"] != c.Leader().Name {
		t.Fatalf("health: HTTP %d %v", resp.StatusCode, health)
	}

	// grpc.health.v1 over the Connect protocol, no token needed.
	req, _ := http.NewRequest("POST", "http://"+f.APIAddr+"/grpc.health.v1.Health/Check", bytes.NewBufferString("{}"))
	req.Header.Set("Content-Type", "application/json")
	hresp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(hresp.Body)
	hresp.Body.Close()
	if hresp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("SERVING")) {
		t.Fatalf("grpc health: HTTP %d %s", hresp.StatusCode, body)
	}
}
