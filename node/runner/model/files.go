package model

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The file tools work through an os.Root opened on the workspace: the
// kernel resolves every path component under it, so a symlink (or a
// rename racing with the call) cannot lead a read or a write outside,
// and no check-then-use gap is left for one to slip through.

// escaped reports whether err is os.Root refusing a path that resolves
// outside the root (through a symlink, or an absolute symlink, which a
// Root never follows). The error is not exported; its text is stable.
func escaped(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// fileResult reports a file tool's failure: refused when the path leads
// outside the workspace, else the error.
func fileResult(rel string, err error) toolResult {
	if escaped(err) {
		return toolResult{text: fmt.Sprintf("refused: %s leads outside the workspace through a symlink", rel), refused: true}
	}
	return toolResult{text: "error: " + relError(err), ran: true}
}

// relError is err without the workspace's absolute path, which differs
// from node to node and must not enter the context.
func relError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Op + " " + pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}

func (ts *tools) readFile(rel string) toolResult {
	root, err := os.OpenRoot(ts.workspace)
	if err != nil {
		return toolResult{text: "error: the workspace cannot be opened", ran: true}
	}
	defer root.Close()
	fi, err := root.Stat(rel)
	switch {
	case err != nil:
		return fileResult(rel, err)
	case fi.IsDir():
		return toolResult{text: fmt.Sprintf("error: %s is a directory (list_files lists it)", rel), ran: true}
	case !fi.Mode().IsRegular():
		// A FIFO or a device could block the read for good.
		return toolResult{text: fmt.Sprintf("error: %s is not a regular file", rel), ran: true}
	}
	f, err := root.Open(rel)
	if err != nil {
		return fileResult(rel, err)
	}
	defer f.Close()
	// Read one byte past the cap to know whether anything was cut.
	data, err := io.ReadAll(io.LimitReader(f, int64(ts.maxOutput)+1))
	if err != nil {
		return fileResult(rel, err)
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return toolResult{text: fmt.Sprintf("%s is a binary file of %d bytes; not shown", rel, fi.Size()), ok: true, ran: true}
	}
	return toolResult{text: capText(string(data), ts.maxOutput, fi.Size()), ok: true, ran: true}
}

func (ts *tools) writeFile(rel, content string) toolResult {
	root, err := os.OpenRoot(ts.workspace)
	if err != nil {
		return toolResult{text: "error: the workspace cannot be opened", ran: true}
	}
	defer root.Close()
	if dir := filepath.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fileResult(rel, err)
		}
	}
	if err := root.WriteFile(rel, []byte(content), 0o644); err != nil {
		return fileResult(rel, err)
	}
	return toolResult{text: fmt.Sprintf("wrote %d bytes to %s", len(content), rel), ok: true, ran: true}
}

func (ts *tools) listFiles(rel string) toolResult {
	root, err := os.OpenRoot(ts.workspace)
	if err != nil {
		return toolResult{text: "error: the workspace cannot be opened", ran: true}
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return fileResult(rel, err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return fileResult(rel, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			name += "/"
		}
		names = append(names, name)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return toolResult{text: "(empty)", ok: true, ran: true}
	}
	list := strings.Join(names, "\n")
	return toolResult{text: capText(list, ts.maxOutput, int64(len(list))), ok: true, ran: true}
}
