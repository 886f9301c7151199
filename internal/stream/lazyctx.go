package stream

import (
	"context"
	"sync"
)

// lazyCtx is a context made on first use and cancelled by stop. Most
// subscriptions and shares never read the log or evaluate anything that
// needs one while idle; thousands of them then cost no context each.
type lazyCtx struct {
	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	stopped bool
}

// get returns the context, cancelled once stop was called.
func (l *lazyCtx) get() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithCancel(context.Background())
		if l.stopped {
			l.cancel()
		}
	}
	return l.ctx
}

// stop cancels the context, now or when it is made.
func (l *lazyCtx) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.cancel != nil {
		l.cancel()
	}
}
