//go:build unix

package daemon

import "syscall"

// openFileLimit returns the process's open-file limit (the Go runtime
// raises the soft limit to the hard one at start), or 0 when unknown.
func openFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return l.Cur
}
