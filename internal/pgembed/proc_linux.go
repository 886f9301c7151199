package pgembed

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// sysProcAttr returns the attributes for initdb and the server. Pdeathsig
// makes the kernel send SIGINT (fast shutdown) when Sluice dies, even by
// SIGKILL. Setpgid keeps a Ctrl-C at the terminal from reaching the server
// directly, so Sluice decides when it stops.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGINT}
}

// processAlive reports whether pid is a running process. A zombie counts
// as gone: it has released everything, and an orphan's zombie may never be
// reaped if PID 1 does not reap.
func processAlive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses, which may itself
	// contain ") ".
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return true
	}
	state := stat[i+2]
	return state != 'Z' && state != 'X'
}

// isPostgres reports whether pid runs the postgres binary.
func isPostgres(pid int) bool {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	name := filepath.Base(string(argv0))
	// Child processes retitle themselves "postgres: ..."; the postmaster
	// keeps its command line.
	return name == "postgres" || name == "postmaster" || bytes.HasPrefix(cmdline, []byte("postgres:"))
}
