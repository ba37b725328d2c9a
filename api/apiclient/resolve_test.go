package apiclient

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNormalizeAddr(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"127.0.0.1:7401", "http://127.0.0.1:7401"},
		{"localhost:7401", "http://localhost:7401"},
		{"  node-1:7401/ ", "http://node-1:7401"},
		{":7401", "http://127.0.0.1:7401"},
		{"[::1]:7401", "http://[::1]:7401"},
		{"http://10.0.0.2:7401", "http://10.0.0.2:7401"},
		{"https://fak.example.com/", "https://fak.example.com"},
		{"https://fak.example.com/prefix/", "https://fak.example.com/prefix"},
	}
	for _, tt := range tests {
		got, err := NormalizeAddr(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("NormalizeAddr(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "   ", "ftp://host:21", "http://", "http://bad host:1"} {
		if got, err := NormalizeAddr(bad); err == nil {
			t.Errorf("NormalizeAddr(%q) = %q, want an error", bad, got)
		}
	}
}

func TestResolveAddr(t *testing.T) {
	env := map[string]string{"FAK_ADDR": "10.0.0.9:7401"}
	if got, _ := ResolveAddr("", mapEnv(env)); got != "http://10.0.0.9:7401" {
		t.Errorf("env: got %q", got)
	}
	if got, _ := ResolveAddr("10.0.0.1:1", mapEnv(env)); got != "http://10.0.0.1:1" {
		t.Errorf("flag over env: got %q", got)
	}
	if got, _ := ResolveAddr("https://n3:7403/", mapEnv(env)); got != "https://n3:7403" {
		t.Errorf("https flag: got %q", got)
	}
	if got, _ := ResolveAddr(":7405", mapEnv(nil)); got != "http://127.0.0.1:7405" {
		t.Errorf(":port: got %q", got)
	}
	if got, _ := ResolveAddr("", mapEnv(nil)); got != DefaultAddr {
		t.Errorf("default: got %q", got)
	}
	if _, err := ResolveAddr("ftp://x", mapEnv(nil)); err == nil {
		t.Error("ftp:// accepted")
	}
}

func TestResolveTokenOrder(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, DevTokenFile), "dev-token\n")
	tokenFile := filepath.Join(dir, "token-file")
	writeFile(t, tokenFile, "  file-token \n")

	tests := []struct {
		name      string
		flagToken string
		env       map[string]string
		want      string
	}{
		{"flag wins", "flag-token", map[string]string{"FAK_TOKEN": "env-token", "FAK_TOKEN_FILE": tokenFile}, "flag-token"},
		{"env FAK_TOKEN next", "", map[string]string{"FAK_TOKEN": "env-token", "FAK_TOKEN_FILE": tokenFile}, "env-token"},
		{"FAK_TOKEN_FILE next", "", map[string]string{"FAK_TOKEN_FILE": tokenFile}, "file-token"},
		{"dev token last", "", nil, "dev-token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveToken(tt.flagToken, mapEnv(tt.env), dir)
			if err != nil || got != tt.want {
				t.Errorf("ResolveToken = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestResolveTokenWithoutAnyTokenIsEmpty(t *testing.T) {
	got, err := ResolveToken("", mapEnv(nil), t.TempDir())
	if err != nil || got != "" {
		t.Errorf("ResolveToken = %q, %v; want no token and no error", got, err)
	}
}

// A node's tokens file works as FAK_TOKEN_FILE: its first token, with or
// without a role.
func TestResolveTokenFromANodesTokensFile(t *testing.T) {
	dir := t.TempDir()
	for name, tt := range map[string]struct{ content, want string }{
		"role":           {"# tokens\n\noperator  s3cret \nread r\n", "s3cret"},
		"bare":           {"\n  bare-token\nread r\n", "bare-token"},
		"not a role":     {"abc def\n", "abc def"},
		"comment, agent": {"# operator x\nagent a1\n", "a1"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		writeFile(t, path, tt.content)
		got, err := ResolveToken("", mapEnv(map[string]string{"FAK_TOKEN_FILE": path}), dir)
		if err != nil || got != tt.want {
			t.Errorf("%s: ResolveToken = %q, %v; want %q", name, got, err, tt.want)
		}
	}
}

func TestResolveTokenBadFiles(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	writeFile(t, empty, " \n")

	_, err := ResolveToken("", mapEnv(map[string]string{"FAK_TOKEN_FILE": filepath.Join(dir, "missing")}), dir)
	if err == nil || !strings.Contains(err.Error(), "read token file") {
		t.Errorf("missing FAK_TOKEN_FILE: err = %v", err)
	}
	_, err = ResolveToken("", mapEnv(map[string]string{"FAK_TOKEN_FILE": empty}), dir)
	if err == nil || !strings.Contains(err.Error(), "holds no token") {
		t.Errorf("empty FAK_TOKEN_FILE: err = %v", err)
	}
	// An unreadable dev token (here: a directory) is an error, not "no token".
	if err := os.MkdirAll(filepath.Join(dir, DevTokenFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ResolveToken("", mapEnv(nil), dir); err == nil {
		t.Error("unreadable dev token: want an error")
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
