package engine

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/sluice-dev/sluice"
)

// Reads that miss a cached walk of a database's schema versions (a read
// of the past: scanVersions; the ETag of a document read now: dropsOf)
// wait for one walk, which any of them may have started. That walk is
// theirs together, not the request's that started it: it runs on a
// context that no caller's cancellation reaches, bounded by walkTimeout
// of its own, and each caller waits for it only as long as its own
// context lasts. It used to run on the first request's context: when
// that client went away, every read waiting for the walk failed with its
// cancellation, told "it ran longer than statement_timeout allows"
// (TestSharedWalkOutlivesTheReadThatStartedIt).

// walkTimeout bounds a shared walk of schema versions: each of its
// statements is bounded by statement_timeout too, but a walk of many
// versions is many statements. The longest measured (152 changes of 900
// classes, each touching every class) takes seconds.
const walkTimeout = 2 * time.Minute

// shareWalk runs walk once for the concurrent callers of key in g, on a
// context of its own (see above), and returns what it found; a caller
// whose context ends first returns its context's error, and the walk
// goes on for the others (and for the cache it fills).
func (e *Engine) shareWalk(ctx context.Context, g *singleflight.Group, key string, walk func(ctx context.Context) (any, error)) (any, error) {
	limit := e.walkTimeout
	ch := g.DoChan(key, func() (v any, err error) {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
		defer cancel()
		// DoChan runs walk on a goroutine of its own, which re-panics
		// where no handler recovers: a panic is an error, as a
		// handler's is a 500, never a crashed daemon.
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("walk of schema versions: panic: %v\n%s", p, debug.Stack())
			}
		}()
		v, err = walk(wctx)
		if err != nil && wctx.Err() != nil {
			// Its own limit ended it (its statement cancelled, or
			// a context error): say so, not statement_timeout.
			return nil, fmt.Errorf("%w (%v)", sluice.Errorf(sluice.CodeUnavailable,
				"reading this database needs a walk of its schema versions, which took longer than %s; retry", limit), err)
		}
		return v, err
	})
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
