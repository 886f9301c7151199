package pgembed

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

const (
	// defaultRestartDelay and defaultMaxRestarts are Options.RestartDelay
	// and Options.MaxRestarts when zero: five restarts take 0.5+1+2+4+8 =
	// 15.5 s of waiting, long enough for a transient cause (the old
	// server's backends still exiting, a full disk being cleared) and
	// short enough that a restart policy outside takes over soon when it
	// will not come back.
	defaultRestartDelay = 500 * time.Millisecond
	defaultMaxRestarts  = 5
	maxRestartDelay     = 8 * time.Second

	// RestartWindow is how long an unexpected exit counts towards
	// Options.MaxRestarts.
	RestartWindow = 5 * time.Minute

	// orphanWait bounds the wait for a dead postmaster's backends to exit
	// before the next server starts (they hold its shared memory, and
	// Postgres refuses to start beside them).
	orphanWait = 10 * time.Second
)

// Failed is closed when the supervisor gave up restarting the server; Err
// then says why. It is never closed once Stop was called.
func (p *Postgres) Failed() <-chan struct{} { return p.failed }

// Err returns why the supervisor gave up, once Failed is closed, else nil.
func (p *Postgres) Err() error {
	select {
	case <-p.failed:
		return p.failErr
	default:
		return nil
	}
}

// Restarts returns how many times the server was restarted and became
// ready again.
func (p *Postgres) Restarts() int64 { return p.restarted.Load() }

// supervise restarts the server whenever it exits without Stop asking,
// until ctx ends (Stop) or it gives up. It owns p.cur's replacement.
func (p *Postgres) supervise(ctx context.Context) {
	defer close(p.superDone)
	var exits []time.Time
	for {
		s := p.current()
		select {
		case <-s.exited:
		case <-ctx.Done():
			return
		}
		if ctx.Err() != nil {
			return // Stop signals the server only after this returns
		}
		p.up.Store(false)
		now := p.now()
		recent := exits[:0]
		for _, t := range exits {
			if now.Sub(t) < RestartWindow {
				recent = append(recent, t)
			}
		}
		exits = append(recent, now)
		pid := 0
		if s.cmd.Process != nil {
			pid = s.cmd.Process.Pid
		}
		p.endOrphans(ctx)
		if p.maxRestarts < 0 || len(exits) > p.maxRestarts {
			p.failErr = fmt.Errorf("pgembed: postgres exited unexpectedly (%v) %d times within %v; not restarting it again; server log:\n%s",
				s.err, len(exits), RestartWindow, p.logs.tail())
			p.logger.Error("embedded postgres exited unexpectedly; giving up", "err", s.err, "pid", pid, "exits", len(exits), "within", RestartWindow)
			close(p.failed)
			return
		}
		delay := min(p.restartDelay<<(len(exits)-1), maxRestartDelay)
		p.logger.Error("embedded postgres exited unexpectedly; restarting it", "err", s.err, "pid", pid, "in", delay, "exits", len(exits), "within", RestartWindow)
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return
		}
		next := p.launch()
		p.mu.Lock()
		p.cur = next
		p.mu.Unlock()
		if err := p.waitReady(ctx, next); err != nil {
			if ctx.Err() != nil {
				return // Stop stops next
			}
			p.logger.Error("embedded postgres restart failed", "err", err)
			continue // its exit counts as the next one
		}
		p.restarted.Add(1)
		p.up.Store(true)
		p.logger.Warn("embedded postgres restarted", "pid", next.cmd.Process.Pid, "data_dir", p.dataDir)
	}
}

// endOrphans ends the backends a dead postmaster left (see orphans), and
// waits up to orphanWait for them to go. They notice their postmaster's
// death themselves, but one inside a long statement may take a while, and
// each keeps the old server's shared memory attached, beside which
// Postgres refuses to start.
func (p *Postgres) endOrphans(ctx context.Context) {
	timer := time.NewTimer(orphanWait)
	defer timer.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	told := map[int]bool{}
	for {
		alive := orphans(p.dataDir)
		if len(alive) == 0 {
			return
		}
		for _, pid := range alive {
			if !told[pid] {
				told[pid] = true
				_ = syscall.Kill(pid, syscall.SIGQUIT) // immediate exit
			}
		}
		select {
		case <-tick.C:
		case <-timer.C:
			p.logger.Warn("backends of the dead embedded postgres are still running", "pids", alive)
			return
		case <-ctx.Done():
			return
		}
	}
}
