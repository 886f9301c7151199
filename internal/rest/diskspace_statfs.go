//go:build linux || darwin

package rest

import "golang.org/x/sys/unix"

// diskSpace returns the bytes free to an unprivileged user and the size
// of the file system holding dir; ok is false when it cannot tell.
func diskSpace(dir string) (free, total int64, ok bool) {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0, 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), int64(st.Blocks) * int64(st.Bsize), true
}
