package runner

import (
	"fmt"
	"os"
	"path/filepath"
)

// Workspace returns the session's working directory under root, creating
// it on first use. Session ids are validated by the FSM (no separators),
// but the name is checked again here: a workspace never leaves root.
func Workspace(root, sessionID string) (string, error) {
	if sessionID == "" || sessionID != filepath.Base(sessionID) || sessionID == "." || sessionID == ".." {
		return "", fmt.Errorf("session id %q cannot name a workspace", sessionID)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("workspace root: %w", err)
	}
	dir := filepath.Join(abs, sessionID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	return dir, nil
}
