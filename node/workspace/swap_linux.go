package workspace

import "golang.org/x/sys/unix"

// exchange atomically swaps the directories at a and b, so a reader of b
// sees the old tree or the new one and a crash leaves one of them at b.
// It fails (and Materialize falls back to two renames) on filesystems
// without RENAME_EXCHANGE.
func exchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}
