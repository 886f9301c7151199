package stream

import (
	"errors"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// hangups watches parked connections for their clients hanging up, with
// one epoll instance and one goroutine blocked in epoll_wait for all of
// them, rather than a goroutine blocked in a read each. A connection is
// watched for EPOLLRDHUP (the client closed its side) and, always
// reported, EPOLLHUP and EPOLLERR (a reset); not for data, which a client
// of a stream does not send (what it may send anyway is read by the HTTP
// server once the stream ends). Each watch fires once (EPOLLONESHOT).
type hangups struct {
	epfd int
	// stopfd is an eventfd in the set: writing to it ends the loop.
	stopfd int

	mu    sync.Mutex
	next  uint64
	calls map[uint64]func()
	done  chan struct{}
}

func newHangups() (*hangups, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	stopfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	// Token 0 is the stop event.
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, stopfd, &unix.EpollEvent{Events: unix.EPOLLIN}); err != nil {
		unix.Close(stopfd)
		unix.Close(epfd)
		return nil, err
	}
	h := &hangups{epfd: epfd, stopfd: stopfd, calls: map[uint64]func(){}, done: make(chan struct{})}
	go h.loop()
	return h, nil
}

// watch is one connection's watch: made (newWatch), then armed (arm),
// stopped (stop) before the connection is closed or given back.
type watch struct {
	h   *hangups
	tok uint64
	raw syscall.RawConn
	fn  func()
}

// newWatch prepares a watch of raw's connection that calls fn once, from
// the watch's goroutine (it must not block), when its client hangs up,
// unless stopped before. It watches nothing until armed: whoever keeps
// the watch has it before fn can run.
func (h *hangups) newWatch(raw syscall.RawConn, fn func()) *watch {
	h.mu.Lock()
	h.next++
	tok := h.next
	h.mu.Unlock()
	return &watch{h: h, tok: tok, raw: raw, fn: fn}
}

// arm starts the watch. What the caller did before, fn sees (it is handed
// over under the lock the watch's goroutine takes).
func (w *watch) arm() error {
	w.h.mu.Lock()
	w.h.calls[w.tok] = w.fn
	w.h.mu.Unlock()
	w.fn = nil
	ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(uint32(w.tok)), Pad: int32(uint32(w.tok >> 32))}
	var cerr error
	if err := w.raw.Control(func(fd uintptr) { cerr = unix.EpollCtl(w.h.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev) }); err != nil {
		cerr = err
	}
	if cerr != nil {
		w.h.forget(w.tok)
	}
	return cerr
}

// stop ends the watch: fn is not called after it returns, unless it runs
// already.
func (w *watch) stop() {
	w.h.forget(w.tok)
	_ = w.raw.Control(func(fd uintptr) { _ = unix.EpollCtl(w.h.epfd, unix.EPOLL_CTL_DEL, int(fd), nil) })
}

func (h *hangups) forget(tok uint64) {
	h.mu.Lock()
	delete(h.calls, tok)
	h.mu.Unlock()
}

// loop waits for hang-ups until close.
func (h *hangups) loop() {
	defer close(h.done)
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(h.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		for _, ev := range events[:n] {
			tok := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if tok == 0 {
				return // close
			}
			h.mu.Lock()
			fn := h.calls[tok]
			delete(h.calls, tok)
			h.mu.Unlock()
			if fn != nil {
				fn()
			}
		}
	}
}

// shutdown shuts raw's connection down both ways: a write blocked on it
// fails at once, and the client reads an end. The descriptor stays open
// for its owner to close. Safe for concurrent use with the owner's writes.
func shutdown(raw syscall.RawConn) {
	_ = raw.Control(func(fd uintptr) { _ = unix.Shutdown(int(fd), unix.SHUT_RDWR) })
}

// close stops the watch; every watched connection must be unwatched.
func (h *hangups) close() {
	var one [8]byte
	one[0] = 1
	_, _ = unix.Write(h.stopfd, one[:])
	<-h.done
	unix.Close(h.stopfd)
	unix.Close(h.epfd)
}
