package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// field returns the value of "Key: value" in fields output, or "".
func field(out, key string) string {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `:\s+(.*)$`).FindStringSubmatch(out)
	if m == nil {
		return ""
	}
	return strings.TrimSpace(m[1])
}

// TestSnapshotCommands saves a one-node fleet's state, inspects the file
// (table and JSON), refuses a corrupted copy offline and on the fleet,
// and restores the saved state over later writes.
func TestSnapshotCommands(t *testing.T) {
	fleet := oneNodeFleet(t)
	n1 := fleet.Nodes[0]
	addr := n1.APIAddr
	sessions := fleet.Sessions(n1)
	ctx := fleet.Context(time.Minute)
	for _, title := range []string{"one", "two"} {
		resp, err := sessions.CreateSession(ctx, connect.NewRequest(&fakv1.CreateSessionRequest{Title: title}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sessions.AppendEvents(ctx, connect.NewRequest(&fakv1.AppendEventsRequest{
			SessionId: resp.Msg.GetSession().GetSessionId(), Events: []*fakv1.EventInput{{Kind: "note", Text: "x"}},
		})); err != nil {
			t.Fatal(err)
		}
	}
	// Two sessions, each session.created + epoch.changed + one note.
	const wantSessions, wantEvents = "2", "6"

	path := filepath.Join(t.TempDir(), "fleet.snap")
	code, out, errOut := runCLI(t, addr, "snapshot", "save", path)
	if code != exitOK || field(out, "Sessions") != wantSessions || field(out, "Events") != wantEvents {
		t.Fatalf("save: code %d stdout %q stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("save left %s.tmp behind (%v)", path, err)
	}

	code, out, errOut = runCLI(t, addr, "snapshot", "inspect", path)
	if code != exitOK || field(out, "Sessions") != wantSessions || field(out, "Events") != wantEvents ||
		field(out, "Checksum") != "ok" || field(out, "Version") != "1" || field(out, "Node") != n1.Name {
		t.Fatalf("inspect: code %d stdout %q stderr %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, addr, "-o", "json", "snapshot", "inspect", path)
	var meta fakv1.SnapshotMeta
	if code != exitOK || protojson.Unmarshal([]byte(out), &meta) != nil || meta.GetSessions() != 2 || meta.GetEvents() != 6 || meta.GetIndex() == 0 {
		t.Fatalf("inspect -o json: code %d stdout %q stderr %q", code, out, errOut)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1
	bad := filepath.Join(t.TempDir(), "bad.snap")
	if err := os.WriteFile(bad, data, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, addr, "snapshot", "inspect", bad)
	if code != exitError || out != "" || !strings.Contains(errOut, "checksum mismatch") {
		t.Errorf("inspect of a corrupted file: code %d stdout %q stderr %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, addr, "snapshot", "restore", bad)
	if code != exitError || !strings.HasPrefix(errOut, "Error: INVALID_SNAPSHOT: ") || !strings.Contains(errOut, "checksum mismatch") {
		t.Errorf("restore of a corrupted file: code %d stdout %q stderr %q", code, out, errOut)
	}

	if _, err := sessions.CreateSession(ctx, connect.NewRequest(&fakv1.CreateSessionRequest{Title: "later"})); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, addr, "snapshot", "restore", path)
	if code != exitOK || !strings.HasPrefix(out, "Restored snapshot "+path) || field(out, "Sessions") != wantSessions {
		t.Fatalf("restore: code %d stdout %q stderr %q", code, out, errOut)
	}
	list, err := sessions.ListSessions(ctx, connect.NewRequest(&fakv1.ListSessionsRequest{}))
	if err != nil || len(list.Msg.GetSessions()) != 2 {
		t.Fatalf("sessions after restore: %v, %v; want the two saved", list.Msg.GetSessions(), err)
	}

	code, _, errOut = runCLI(t, addr, "snapshot", "inspect", filepath.Join(t.TempDir(), "missing.snap"))
	if code != exitError || !strings.Contains(errOut, "no such file") {
		t.Errorf("inspect of a missing file: code %d stderr %q", code, errOut)
	}
}

// TestOperatorCommands drives the Raft operator commands against a
// one-node fleet: the refusals with their reasons, and a transfer to the
// leader itself.
func TestOperatorCommands(t *testing.T) {
	fleet := oneNodeFleet(t)
	addr := fleet.Nodes[0].APIAddr

	for _, tc := range []struct {
		args       []string
		code       int
		out, error string
	}{
		{[]string{"operator", "raft", "remove-peer"}, exitUsage, "", "Error: --id is required"},
		{[]string{"operator", "raft", "remove-peer", "--id", "nobody"}, exitError, "", "Error: NOT_FOUND: "},
		{[]string{"operator", "raft", "remove-peer", "--id", "n1"}, exitError, "", "Error: PEER_IS_LEADER: "},
		{[]string{"operator", "raft", "transfer-leader", "--to", "nobody"}, exitError, "", "Error: NOT_FOUND: "},
		{[]string{"operator", "raft", "transfer-leader", "--to", "n1"}, exitOK, "Leader is now n1\n", ""},
		{[]string{"operator", "raft"}, exitUsage, "", "Error: unknown command \"operator raft\""},
	} {
		code, out, errOut := runCLI(t, addr, tc.args...)
		if code != tc.code || out != tc.out || !strings.HasPrefix(errOut, tc.error) {
			t.Errorf("%s: code %d stdout %q stderr %q; want code %d stdout %q stderr starting %q",
				strings.Join(tc.args, " "), code, out, errOut, tc.code, tc.out, tc.error)
		}
	}
}
