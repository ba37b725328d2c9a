//go:build unix

package cluster

import "golang.org/x/sys/unix"

// diskSpace is the free (to an unprivileged writer) and total bytes of the
// file system holding dir; 0, 0 when statfs fails.
func diskSpace(dir string) (free, total uint64) {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0, 0
	}
	return uint64(st.Bavail) * uint64(st.Bsize), uint64(st.Blocks) * uint64(st.Bsize)
}
