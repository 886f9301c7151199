package stream

import "sync"

// Ender is what a guard ends: whatever serves the stream at the time, a
// subscription or a member of a shared one (anything with End). A stream
// registers its guard with Ender.End before it has a subscription, then
// hands each one it serves from to Serve.
type Ender struct {
	mu  sync.Mutex
	err error
	cur interface{ End(error) }
}

// End ends the stream with err: what serves it now, and anything handed to
// Serve later. Only the first error counts.
func (e *Ender) End(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return
	}
	e.err = err
	if e.cur != nil {
		e.cur.End(err)
	}
}

// Serve makes x what serves the stream. When the stream already ended, x
// is ended at once and the error returned.
func (e *Ender) Serve(x interface{ End(error) }) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cur = x
	if e.err != nil {
		x.End(e.err)
	}
	return e.err
}

// Err returns why the stream was ended, nil while it was not.
func (e *Ender) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}
