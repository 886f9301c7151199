//go:build !unix

package daemon

// openFileLimit returns 0: the limit is not known on this system.
func openFileLimit() uint64 { return 0 }
