package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/node/testcluster"
)

// TestOperatorVerifyReplayOnAFleet: every node of a real fleet equals its
// rebuild; --all prints a row per node, --node relays, -o json prints the
// response, and --node with --all is a usage error.
func TestOperatorVerifyReplayOnAFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an in-process fleet; skipped with -short")
	}
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testcluster.Token)
	fleet := testcluster.New(t, testcluster.Options{})
	addr := fleet.Nodes[0].APIAddr

	code, out, errOut := runCLI(t, addr, "operator", "verify-replay", "--all")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || errOut != "" || len(lines) != 4 || !strings.HasPrefix(lines[0], "NODE ") {
		t.Fatalf("verify-replay --all: code %d stdout %q stderr %q", code, out, errOut)
	}
	for i, line := range lines[1:] {
		f := strings.Fields(line)
		// NODE INDEX SNAPSHOT REPLAYED SNAPSHOT+LOG LOG DIGEST: no snapshot
		// yet, so the one rebuild replays the whole log.
		if len(f) != 7 || f[0] != fleet.Nodes[i].Name || f[2] != "-" || f[3] != f[1] || f[4] != "-" || f[5] != "equal" {
			t.Fatalf("row %q", line)
		}
	}

	code, out, errOut = runCLI(t, addr, "-o", "json", "operator", "verify-replay", "--node", "n2")
	var resp fakv1.VerifyReplayResponse
	if code != exitOK || protojson.Unmarshal([]byte(out), &resp) != nil || len(resp.GetNodes()) != 1 ||
		resp.GetNodes()[0].GetNode() != "n2" || !resp.GetNodes()[0].GetEqual() {
		t.Fatalf("verify-replay --node n2 -o json: code %d stdout %q stderr %q", code, out, errOut)
	}

	if code, _, errOut = runCLI(t, addr, "operator", "verify-replay", "--node", "n2", "--all"); code != exitUsage ||
		!strings.HasPrefix(errOut, "Error: --node and --all are exclusive\n") {
		t.Fatalf("--node with --all: code %d stderr %q", code, errOut)
	}
}

// fakeVerify answers VerifyReplay with a fixed response.
type fakeVerify struct {
	fakv1connect.UnimplementedOperatorServiceHandler
	resp *fakv1.VerifyReplayResponse
}

func (f fakeVerify) VerifyReplay(context.Context, *connect.Request[fakv1.VerifyReplayRequest]) (*connect.Response[fakv1.VerifyReplayResponse], error) {
	return connect.NewResponse(f.resp), nil
}

// A node whose rebuild differs, and one that could not be checked: the
// table says what differs and where, and fakctl exits 1 naming both.
func TestOperatorVerifyReplayReportsADifference(t *testing.T) {
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testToken)
	resp := &fakv1.VerifyReplayResponse{Nodes: []*fakv1.ReplayCheck{
		{Node: "n3", Error: "node n3 is dead"},
		{Node: "n1", LiveIndex: 90, LiveDigest: "00112233445566778899", Equal: true, LogOnlySkipped: "the log starts at index 40",
			Rebuilds: []*fakv1.ReplayRebuild{{Source: "snapshot+log", SnapshotId: "2-80-1", SnapshotIndex: 80, Entries: 10, Equal: true}}},
		{Node: "n2", LiveIndex: 90, LiveDigest: "aabbccddeeff00112233", Rebuilds: []*fakv1.ReplayRebuild{
			{Source: "snapshot+log", SnapshotId: "2-80-2", SnapshotIndex: 80, Entries: 10, Equal: true},
			{Source: "log", Entries: 90, Differences: []*fakv1.BucketDifference{{Bucket: "journal", LiveKeys: 7, RebuiltKeys: 6}},
				FirstDifference: &fakv1.KeyDifference{Bucket: "journal", Key: []byte("s1\x00"), Kind: "only in the live state"}},
		}},
	}}
	mux := http.NewServeMux()
	mux.Handle(fakv1connect.NewOperatorServiceHandler(fakeVerify{resp: resp}, connect.WithInterceptors(requireToken{testToken})))
	server := httptest.NewUnstartedServer(mux)
	server.Config.Protocols = new(http.Protocols)
	server.Config.Protocols.SetHTTP1(true)
	server.Config.Protocols.SetUnencryptedHTTP2(true) // fakctl speaks h2c
	server.Start()
	t.Cleanup(server.Close)

	code, out, errOut := runCLI(t, server.URL, "operator", "verify-replay", "--all")
	want := []string{
		"NODE   INDEX   SNAPSHOT      REPLAYED   SNAPSHOT+LOG   LOG       DIGEST         DETAIL",
		"n1     90      2-80-1 (80)   10         equal          skipped   001122334455   log alone skipped: the log starts at index 40",
		`n2     90      2-80-2 (80)   10         equal          DIFFERS   aabbccddeeff   log: buckets journal (7/6 keys), first at journal key "s1\x00" (only in the live state)`,
		"n3     -       -             -          -              -         -              error: node n3 is dead",
	}
	if code != exitError || strings.TrimRight(out, "\n") != strings.Join(want, "\n") ||
		errOut != "Error: replay check failed: n2 differs from its rebuild, n3 could not be checked\n" {
		t.Fatalf("code %d\nstdout:\n%s\nwant:\n%s\nstderr %q", code, out, strings.Join(want, "\n"), errOut)
	}
}
