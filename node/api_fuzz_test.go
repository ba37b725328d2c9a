package node_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// fuzzedProcedures are the unary procedures FuzzAPIRequests sends bodies
// to: every one a client or a peer node calls in normal work. Left out:
// those that end or replace the node's service (Leave, snapshot restore,
// Raft peer removal and leadership transfer, drain) and the long ones
// (snapshot save, replay verification, a workspace copy from a peer).
var fuzzedProcedures = []string{
	"/fak.v1.SessionService/CreateSession", "/fak.v1.SessionService/ListSessions", "/fak.v1.SessionService/DescribeSession",
	"/fak.v1.SessionService/AppendEvents", "/fak.v1.SessionService/ReadEvents", "/fak.v1.SessionService/StopSession",
	"/fak.v1.SessionService/DiscoverSession", "/fak.v1.SessionService/Attach", "/fak.v1.SessionService/KeepAlive",
	"/fak.v1.SessionService/Detach", "/fak.v1.SessionService/Act", "/fak.v1.SessionService/TakeLease",
	"/fak.v1.SessionService/RenewLease", "/fak.v1.SessionService/ReleaseLease", "/fak.v1.SessionService/AnswerApproval",
	"/fak.v1.SessionService/FreshSession", "/fak.v1.SessionService/ResetSession", "/fak.v1.SessionService/ClearSession",
	"/fak.v1.SessionService/NewSession", "/fak.v1.SessionService/ForkSession", "/fak.v1.SessionService/GetLineage",
	"/fak.v1.SessionService/MoveSession", "/fak.v1.SessionService/GetMove", "/fak.v1.SessionService/PurgeSession",
	"/fak.v1.RunnerService/AppendRunnerEvents", "/fak.v1.RunnerService/CommitCheckpoint", "/fak.v1.RunnerService/CommitRestore",
	"/fak.v1.RunnerService/FailMove", "/fak.v1.RunnerService/GetWorkspaceManifest", "/fak.v1.RunnerService/RecordWorkspaceCopy",
	"/fak.v1.LifecycleService/BindLaunch", "/fak.v1.LifecycleService/ProviderSessionStart", "/fak.v1.LifecycleService/ProviderSessionEnd",
	"/fak.v1.LifecycleService/RecordUsage", "/fak.v1.LifecycleService/DescribeLaunch",
	"/fak.v1.AclService/CreateToken", "/fak.v1.AclService/ListTokens", "/fak.v1.AclService/RevokeToken",
	"/fak.v1.ClusterService/Members", "/fak.v1.ClusterService/Status", "/fak.v1.ClusterService/ReadIndex",
	"/fak.v1.ClusterService/Overview", "/fak.v1.ClusterService/AuditLog", "/fak.v1.NodeService/ListNodes", "/fak.v1.NodeService/DrainStatus",
}

// inputOf is the request message type of a procedure.
func inputOf(t testing.TB, procedure string) protoreflect.MessageType {
	service, method, _ := strings.Cut(strings.TrimPrefix(procedure, "/"), "/")
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		t.Fatalf("%s: %v", procedure, err)
	}
	m := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(method))
	mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
	if err != nil {
		t.Fatalf("%s: %v", procedure, err)
	}
	return mt
}

// connectError is a Connect unary error body.
type connectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details []struct {
		Type string `json:"type"`
	} `json:"details"`
}

// FuzzAPIRequests posts arbitrary bodies, as protobuf or JSON, to the API
// of a running node. Whatever arrives, the node answers — a result or an
// error — and keeps serving; it never fails as a server (internal,
// unknown, a 5xx that is not a declared unavailability); and a body that
// decodes as the procedure's request, but is refused, is refused with a
// machine-readable reason (fak.v1.ErrorInfo), as every fak error is.
func FuzzAPIRequests(f *testing.F) {
	c := testcluster.New(f, testcluster.Options{Nodes: 1})
	n := c.Nodes[0]
	c.WaitForLeader(30 * time.Second)
	id := createSession(f, c, n, "fuzzed")
	for i, p := range fuzzedProcedures {
		f.Add(uint8(i), []byte(`{"sessionId":"`+id+`"}`), true)
		f.Add(uint8(i), []byte(`{"sessionId":"`+id+`","events":[{"kind":"note","text":"x"}],"text":"t","attachmentId":"a"}`), true)
		f.Add(uint8(i), []byte{0x0a, 0x03, 's', 'e', 's', 0x10, 0x01}, false)
		f.Add(uint8(i), []byte{0xff, 0xff, 0xff}, false)
		f.Add(uint8(i), []byte(`{"sessionId":`), true)
		if strings.Contains(p, "Append") {
			f.Add(uint8(i), []byte(`{"sessionId":"`+id+`","events":[{"kind":"input","text":"no lease"}]}`), true)
			f.Add(uint8(i), []byte(`{"sessionId":"`+id+`","events":[{"kind":"","text":"\u0000"}]}`), true)
		}
	}
	hc := c.HTTPClient()
	base := "http://" + n.APIAddr
	f.Fuzz(func(t *testing.T, which uint8, body []byte, asJSON bool) {
		procedure := fuzzedProcedures[int(which)%len(fuzzedProcedures)]
		contentType := "application/proto"
		if asJSON {
			contentType = "application/json"
		}
		req, err := http.NewRequest(http.MethodPost, base+procedure, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Authorization", "Bearer "+testcluster.Token)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: no answer: %v", procedure, err)
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		var ce connectError
		if err := json.Unmarshal(raw, &ce); err != nil {
			t.Fatalf("%s: status %d with a body that is not a Connect error: %q", procedure, resp.StatusCode, raw)
		}
		switch ce.Code {
		case "internal", "unknown", "data_loss", "unimplemented":
			t.Fatalf("%s: a server failure for a client's body: %s: %s", procedure, ce.Code, ce.Message)
		}
		msg := inputOf(t, procedure).New().Interface()
		decodes := proto.Unmarshal(body, msg) == nil
		if asJSON {
			decodes = protojson.Unmarshal(body, msg) == nil
		}
		if !decodes {
			return // refused by the codec: Connect's own invalid_argument
		}
		for _, d := range ce.Details {
			if d.Type == "fak.v1.ErrorInfo" {
				return
			}
		}
		t.Fatalf("%s: refused (%s: %s) without a fak.v1.ErrorInfo reason", procedure, ce.Code, ce.Message)
	})
}
