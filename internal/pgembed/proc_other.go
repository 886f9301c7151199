//go:build !linux

package pgembed

import (
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr returns the attributes for initdb and the server. Outside
// Linux there is no parent-death signal: a SIGKILLed Sluice leaves the
// server running, and the next Start stops it. Setpgid keeps a Ctrl-C at the
// terminal from reaching the server directly.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}

// processAlive reports whether pid is a running process.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// isPostgres reports whether pid runs the postgres binary.
func isPostgres(pid int) bool {
	out, err := exec.Command("ps", "-o", "comm=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return false
	}
	name := strings.TrimSpace(string(out))
	return strings.HasSuffix(name, "postgres") || strings.HasSuffix(name, "postmaster")
}

// orphans returns nothing outside Linux: a dead server's backends are not
// looked for, and a restart that finds them still running fails and is
// retried.
func orphans(string) []int { return nil }
