package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildFak compiles cmd/fak (static, CGO_ENABLED=0) into dir, with extra
// build tags (e.g. a deliberately broken build for the self-test), and
// returns the binary's path.
func BuildFak(dir, tags string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	name := "fak"
	if tags != "" {
		name += "-" + strings.NewReplacer(",", "-", " ", "-").Replace(tags)
	}
	out := filepath.Join(dir, name)
	args := []string{"build", "-o", out}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	args = append(args, "./cmd/fak")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out, nil
}

// moduleRoot finds the fak module (the directory holding go.mod) from the
// working directory upwards.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/fak-dev/fak\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run from inside the fak repository (no go.mod of github.com/fak-dev/fak above the working directory)")
		}
		dir = parent
	}
}
