package main

import (
	"strings"
	"testing"

	"github.com/fak-dev/fak/node/testcluster"
)

// fakctl reaches a fleet with mutual TLS through the TLS flags or their
// environment variables; host:port then means https; without a client
// certificate the call fails in one line.
func TestTLSAgainstARealFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an in-process fleet; skipped with -short")
	}
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testcluster.Token)
	fleet := testcluster.New(t, testcluster.Options{Nodes: 1, TLS: true})
	addr := fleet.Nodes[0].APIAddr
	files := fleet.IssueClient("fakctl")

	code, out, errOut := runCLI(t, addr, "cluster", "peers", "--tls-ca", files.CA, "--tls-cert", files.Cert, "--tls-key", files.Key)
	if code != exitOK || !strings.Contains(out, "n1") {
		t.Fatalf("with flags: code %d stdout %q stderr %q", code, out, errOut)
	}

	t.Setenv("FAK_CACERT", files.CA)
	t.Setenv("FAK_CLIENT_CERT", files.Cert)
	t.Setenv("FAK_CLIENT_KEY", files.Key)
	code, out, errOut = runCLI(t, "https://"+addr, "cluster", "peers")
	if code != exitOK || !strings.Contains(out, "n1") {
		t.Fatalf("with env: code %d stdout %q stderr %q", code, out, errOut)
	}

	t.Setenv("FAK_CLIENT_CERT", "")
	t.Setenv("FAK_CLIENT_KEY", "")
	code, _, errOut = runCLI(t, addr, "cluster", "peers")
	if code != exitError || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "client certificate") {
		t.Fatalf("without a client certificate: code %d stderr %q; want exit 1 and one line naming the client certificate", code, errOut)
	}

	code, _, errOut = runCLI(t, addr, "cluster", "peers", "--tls-cert", files.Cert)
	if code != exitUsage {
		t.Fatalf("certificate without key: code %d stderr %q; want a usage error", code, errOut)
	}
}
