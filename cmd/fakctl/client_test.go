package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The resolution rules themselves are tested in api/apiclient; here only
// that fakctl reports a bad address as a usage error (exit code 2).

func TestNormalizeAddrIsUsageError(t *testing.T) {
	if got, err := normalizeAddr(":7401"); err != nil || got != "http://127.0.0.1:7401" {
		t.Errorf("normalizeAddr(\":7401\") = %q, %v", got, err)
	}
	for _, bad := range []string{"", "ftp://host:21", "http://"} {
		var ue *usageError
		if _, err := normalizeAddr(bad); !errors.As(err, &ue) {
			t.Errorf("normalizeAddr(%q): err = %v, want a usage error", bad, err)
		}
	}
}

func TestResolveAddr(t *testing.T) {
	env := map[string]string{"FAK_ADDR": "10.0.0.9:7401"}
	if got, _ := resolveAddr("", mapEnv(env)); got != "http://10.0.0.9:7401" {
		t.Errorf("env: got %q", got)
	}
	if got, _ := resolveAddr("10.0.0.1:1", mapEnv(env)); got != "http://10.0.0.1:1" {
		t.Errorf("flag over env: got %q", got)
	}
	if got, _ := resolveAddr("", mapEnv(nil)); got != defaultAddr {
		t.Errorf("default: got %q", got)
	}
	var ue *usageError
	if _, err := resolveAddr("", mapEnv(map[string]string{"FAK_ADDR": "ftp://x"})); !errors.As(err, &ue) {
		t.Errorf("bad FAK_ADDR: err = %v, want a usage error", err)
	}
}

func mapEnv(env map[string]string) func(string) string {
	return func(key string) string { return env[key] }
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
