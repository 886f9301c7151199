//go:build !linux

package pgembed

import (
	"errors"
	"os/exec"
	"path/filepath"
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

// isZombie is always false here: processAlive counts a zombie as alive,
// so stopLeftover never asks.
func isZombie(int) bool { return false }

// isPostmasterOf reports whether pid is the postmaster of the server on
// dataDir: a postgres process, not retitled as its children are
// ("postgres: checkpointer"…), started with -D dataDir (its working
// directory cannot be read here).
func isPostmasterOf(pid int, dataDir string) bool {
	out, err := exec.Command("ps", "-o", "command=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return false
	}
	args := strings.Fields(string(out))
	if len(args) == 0 {
		return false
	}
	if name := filepath.Base(args[0]); name != "postgres" && name != "postmaster" {
		return false
	}
	for i, a := range args[:len(args)-1] {
		if a == "-D" {
			return filepath.Clean(args[i+1]) == filepath.Clean(dataDir)
		}
	}
	return false
}

// orphans returns nothing outside Linux: a dead server's backends are not
// looked for, and a restart that finds them still running fails and is
// retried.
func orphans(string) []int { return nil }
