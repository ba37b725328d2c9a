//go:build !linux

package workspace

import "errors"

// exchange is not available here: Materialize falls back to two renames.
func exchange(a, b string) error { return errors.New("rename exchange not supported") }

// syncTree fsyncs every file and directory of a freshly built tree.
func syncTree(_ string, files, dirs []string) error { return syncEach(files, dirs) }
