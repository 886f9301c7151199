package stream

import "sync"

// A runner serves streams that have no goroutine of their own: the members
// of a multiplexed connection (its pump) and the parked streams (the
// parker). Whatever may give a stream something to do (its share
// publishing, its heartbeat, its access ending, its client leaving) marks
// it; the runner's workers serve each marked stream, one worker at a
// time per stream, until it has nothing more to do now.

// The scheduling states of a stream in a runner (Stream.state).
const (
	stateIdle    int32 = iota // waiting to be marked
	stateQueued               // marked, waiting for a worker
	stateRunning              // a worker serves it
	stateAgain                // marked while a worker serves it: served again
	stateGone                 // out of the runner: marks are ignored
)

// runBatch is how many marked streams a worker takes at once.
const runBatch = 32

// runner is a queue of marked streams and the workers that serve them.
type runner struct {
	// serve does what s may do now, taking its share's entries into buf
	// (the worker's); it reports false when s left the runner (ended, or
	// continued on a goroutine of its own).
	serve func(s *Stream, buf *[]Entry) bool

	mu   sync.Mutex
	cond sync.Cond
	// ready[head:] are the marked streams in the order they were marked.
	// Taking moves head, not the rest of the queue: a commit to a
	// million streams queues a million, taken 32 at a time.
	ready   []*Stream
	head    int
	stopped bool
	wg      sync.WaitGroup
}

// start starts n workers.
func (r *runner) start(n int, serve func(*Stream, *[]Entry) bool) {
	r.serve = serve
	r.cond.L = &r.mu
	for range n {
		r.wg.Go(r.work)
	}
}

// mark makes s due to be served. It never blocks.
func (r *runner) mark(s *Stream) {
	for {
		switch st := s.state.Load(); st {
		case stateIdle:
			if s.state.CompareAndSwap(stateIdle, stateQueued) {
				r.mu.Lock()
				r.ready = append(r.ready, s)
				r.mu.Unlock()
				r.cond.Signal()
				return
			}
		case stateRunning:
			if s.state.CompareAndSwap(stateRunning, stateAgain) {
				return
			}
		default:
			return // due already, or gone
		}
	}
}

// stop stops the workers once the queue is empty, and waits for them.
func (r *runner) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.cond.Broadcast()
	r.wg.Wait()
}

// work serves marked streams until stopped.
func (r *runner) work() {
	var batch []*Stream
	var buf []Entry
	for {
		r.mu.Lock()
		for r.head == len(r.ready) && !r.stopped {
			r.cond.Wait()
		}
		if r.head == len(r.ready) {
			r.mu.Unlock()
			return
		}
		// Take a few at a time: the workers share a long queue (a
		// commit to thousands of streams) evenly, whichever of them the
		// scheduler runs.
		n := min(len(r.ready)-r.head, runBatch)
		batch = append(batch[:0], r.ready[r.head:r.head+n]...)
		clear(r.ready[r.head : r.head+n])
		r.head += n
		if r.head > len(r.ready)/2 {
			// Compact once half is taken: each stream is moved at most
			// about once, however long the queue.
			rest := copy(r.ready, r.ready[r.head:])
			clear(r.ready[rest:])
			r.ready, r.head = r.ready[:rest], 0
		}
		more := r.head < len(r.ready)
		r.mu.Unlock()
		if more {
			r.cond.Signal()
		}
		for _, s := range batch {
			r.run(s, &buf)
		}
		clear(batch)
	}
}

// run serves s until it has nothing more to do now.
func (r *runner) run(s *Stream, buf *[]Entry) {
	s.state.Store(stateRunning)
	for {
		if !r.serve(s, buf) {
			s.state.Store(stateGone)
			return
		}
		if s.state.CompareAndSwap(stateRunning, stateIdle) {
			return
		}
		s.state.Store(stateRunning) // marked meanwhile: once more
	}
}
