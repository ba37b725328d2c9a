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
	return out, goBuildFak(root, out, tags)
}

// goBuildFak builds cmd/fak of the source tree src into out, static.
func goBuildFak(src, out, tags string) error {
	args := []string{"build", "-o", out}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	args = append(args, "./cmd/fak")
	cmd := exec.Command("go", args...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %v\n%s", strings.Join(args, " "), src, err, b)
	}
	return nil
}

// BuildFakAt compiles cmd/fak as it was at git revision rev of this
// repository (the previous release, for an upgrade run) into dir, from a
// `git archive` of that revision, and returns the binary's path.
func BuildFakAt(dir, rev string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "src-"+rev)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", root, rev, src)
	if b, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %v\n%s", rev, err, b)
	}
	out := filepath.Join(dir, "fak-"+rev[:min(len(rev), 12)])
	return out, goBuildFak(src, out, "")
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
