package bench

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// buildBinary builds the main package pkg into dir and returns its path.
func buildBinary(b *testing.B, dir, pkg string) string {
	b.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	if msg, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		b.Fatalf("go build %s: %v\n%s", pkg, err, msg)
	}
	return out
}

// serverProc is a server running as its own process, so that its CPU time
// and memory can be read apart from the load generator's.
type serverProc struct {
	*dt.Proc
	// problems counts the warnings and errors it logged.
	problems atomic.Int64
}

// startServer runs the binary with args and env and waits until it serves
// (see daemontest.StartProc); it is stopped when the benchmark ends.
func startServer(b *testing.B, env []string, bin string, args ...string) *serverProc {
	b.Helper()
	p := &serverProc{}
	p.Proc = dt.StartProc(b, bin, args, env, func(line string) {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
			// Shown up to three, then counted: a server in trouble may
			// log one line per stream.
			if p.problems.Add(1) <= 3 {
				fmt.Fprintf(os.Stderr, "%s: %s\n", filepath.Base(bin), line)
			}
		}
	})
	return p
}

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// cpuTime returns the user plus system CPU time the process has used.
func (p *serverProc) cpuTime(b *testing.B) time.Duration {
	f, err := statFields(p.Cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return ticks(f[11]) + ticks(f[12])
}

// statFields returns the fields of /proc/<pid>/stat after the command
// name (which may hold spaces): index 0 is field 3 (state), 1 the ppid,
// 11 utime, 12 stime, 13 cutime, 14 cstime.
func statFields(pid int) ([][]byte, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	f := bytes.Fields(raw[bytes.LastIndexByte(raw, ')')+1:])
	if len(f) < 15 {
		return nil, fmt.Errorf("/proc/%d/stat: short: %s", pid, raw)
	}
	return f, nil
}

func ticks(f []byte) time.Duration {
	n, _ := strconv.ParseInt(string(f), 10, 64)
	return time.Duration(n) * clockTick
}

// runTime returns the CPU time process pid has used, in nanoseconds
// (/proc/<pid>/schedstat's first field), where /proc/<pid>/stat counts
// whole clock ticks: a benchmark that reads it between short rounds
// would otherwise add up rounding errors of 10 ms per process.
func runTime(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(raw)
	if len(f) == 0 {
		return 0, fmt.Errorf("/proc/%d/schedstat: empty", pid)
	}
	n, err := strconv.ParseInt(string(f[0]), 10, 64)
	return time.Duration(n), err
}

// postgresCPU returns the CPU time used so far by the cluster serving
// dbURL: the postmaster, its live children (to the nanosecond), and its
// children that exited (in clock ticks).
func postgresCPU(b *testing.B, dbURL string) time.Duration {
	u, err := url.Parse(dbURL)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(u.Query().Get("host"), "postmaster.pid"))
	if err != nil {
		b.Fatal(err)
	}
	pm, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil {
		b.Fatalf("postmaster.pid: %v", err)
	}
	// A child that exits while the children are read is in neither sum
	// (it went to the postmaster's cutime after that was read): read
	// again until the postmaster reaped no child meanwhile.
	for range 20 {
		f, err := statFields(pm)
		if err != nil {
			b.Fatal(err)
		}
		own, err := runTime(pm)
		if err != nil {
			b.Fatal(err)
		}
		total := own + ticks(f[13]) + ticks(f[14])
		entries, err := os.ReadDir("/proc")
		if err != nil {
			b.Fatal(err)
		}
		ppid := []byte(strconv.Itoa(pm))
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if f, err := statFields(pid); err == nil && bytes.Equal(f[1], ppid) {
				if t, err := runTime(pid); err == nil { // else it just exited
					total += t
				}
			}
		}
		g, err := statFields(pm)
		if err != nil {
			b.Fatal(err)
		}
		if bytes.Equal(f[13], g[13]) && bytes.Equal(f[14], g[14]) {
			return total
		}
	}
	b.Fatal("postgres CPU: children kept exiting while they were read")
	return 0
}

// rss returns the process's resident set size in bytes.
func (p *serverProc) rss(b *testing.B) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range bytes.Lines(raw) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))), 10, 64)
			if err != nil {
				b.Fatalf("parse VmRSS: %q", line)
			}
			return kb << 10
		}
	}
	b.Fatalf("no VmRSS in /proc/%d/status", p.Cmd.Process.Pid)
	return 0
}

// resetPeak resets the process's peak resident set size (VmHWM), so that
// peakRSS reports the peak from now on.
func (p *serverProc) resetPeak(b *testing.B) {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.Cmd.Process.Pid), []byte("5"), 0); err != nil {
		b.Fatal(err)
	}
}

// peakRSS returns the process's peak resident set size in bytes since it
// started or resetPeak.
func (p *serverProc) peakRSS(b *testing.B) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range bytes.Lines(raw) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))), 10, 64)
			if err != nil {
				b.Fatalf("parse VmHWM: %q", line)
			}
			return kb << 10
		}
	}
	b.Fatalf("no VmHWM in /proc/%d/status", p.Cmd.Process.Pid)
	return 0
}
