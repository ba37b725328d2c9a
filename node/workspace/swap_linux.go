package workspace

import (
	"os"

	"golang.org/x/sys/unix"
)

// exchange atomically swaps the directories at a and b, so a reader of b
// sees the old tree or the new one and a crash leaves one of them at b.
// It fails (and Materialize falls back to two renames) on filesystems
// without RENAME_EXCHANGE.
func exchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

// syncTree makes a freshly built tree durable with one syncfs(2) of its
// filesystem instead of an fsync per file: a thousand fsyncs cost seconds,
// one syncfs the time to write what is dirty.
func syncTree(root string, files, dirs []string) error {
	f, err := os.Open(root)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return syncEach(files, dirs)
	}
	return nil
}
