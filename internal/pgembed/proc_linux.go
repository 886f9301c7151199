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
	state, exists := processState(pid)
	return exists && state != 'Z' && state != 'X'
}

// isZombie reports whether pid is a process that exited and was not
// reaped (state Z, or X on its way out).
func isZombie(pid int) bool {
	state, exists := processState(pid)
	return exists && (state == 'Z' || state == 'X')
}

// processState returns pid's state letter from /proc/<pid>/stat (R, S,
// Z…), 0 when it cannot be parsed, and whether the process exists.
func processState(pid int) (byte, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The state follows the command name in parentheses, which may itself
	// contain ") ".
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0, true
	}
	return stat[i+2], true
}

// isPostmasterOf reports whether pid is the postmaster of the server on
// dataDir: a postgres process that works in dataDir (the postmaster and
// its children change to their data directory) and whose command line is
// its own (its children retitle themselves as they start, "postgres:
// checkpointer"…, whatever update_process_title says).
func isPostmasterOf(pid int, dataDir string) bool {
	if !inDataDir(pid, dataDir) {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	name := filepath.Base(string(argv0))
	return name == "postgres" || name == "postmaster"
}

// inDataDir reports whether pid is a postgres process whose working
// directory is dataDir.
func inDataDir(pid int, dataDir string) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	lp, rp := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if lp < 0 || rp < lp {
		return false
	}
	if name := string(stat[lp+1 : rp]); name != "postgres" && name != "postmaster" {
		return false
	}
	// Compared as files, not names: dataDir may be reached through a
	// symbolic link.
	cwd, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil {
		return false
	}
	dir, err := os.Stat(dataDir)
	return err == nil && os.SameFile(cwd, dir)
}

// orphans returns the live orphaned postgres processes working in
// dataDir, and reaps those that exited and are this process's children. Called between
// a postmaster's death and the next start, they are the dead server's
// backends: each runs in the data directory, and each calls setsid, so
// neither a process group nor a parent names them. When Sluice is PID 1 (a
// container without an init) they become its children, and their zombies
// are Sluice's to reap; os/exec waits for no postgres process then (the
// dead one was reaped, the next is not started, and a PID 1 Sluice runs
// one server).
func orphans(dataDir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var alive []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		lp, rp := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if lp < 0 || rp < lp {
			continue
		}
		f := bytes.Fields(stat[rp+1:])
		if string(stat[lp+1:rp]) != "postgres" || len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(string(f[1]))
		// Only PID 1 inherits orphans; elsewhere a postgres child of ours
		// is another live server's postmaster (tests run several), whose
		// exit os/exec must see.
		adopted := self == 1 && ppid == self
		if f[0][0] == 'Z' {
			if adopted {
				var status syscall.WaitStatus
				_, _ = syscall.Wait4(pid, &status, syscall.WNOHANG, nil)
			}
			continue
		}
		// An orphan was reparented: to init (or a container's init, PID
		// 1 of its namespace), or to Sluice when it is PID 1. A postgres
		// process in dataDir with another parent belongs to a server
		// another owner started there, never an orphan to end. An
		// adopted process on its way out has no cwd any more, and must
		// still be waited for to be reaped.
		if ppid != 1 && !adopted {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err == nil && cwd == dataDir || err != nil && adopted {
			alive = append(alive, pid)
		}
	}
	return alive
}
