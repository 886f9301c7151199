package engine

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice"
)

// UseLogRetention tells the engine the server's log_retention (0: every
// commit is kept), which a database may extend but not shorten; call it
// before the Engine is used. Without it, any retention is taken.
func (e *Engine) UseLogRetention(r time.Duration) { e.logRetention = r }

// SetLogRetention sets how long database org/name keeps its commits: r (0:
// for ever), or the server's log_retention when r is nil. It needs the
// admin role. A retention shorter than log_retention is refused: pruning
// keeps a database's commits for the longer of the two, so it would mean
// nothing.
func (e *Engine) SetLogRetention(ctx context.Context, u *sluice.User, org, name string, r *time.Duration) (*sluice.Database, error) {
	d, _, err := e.Database(ctx, u, org, name, sluice.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if err := writable(d); err != nil {
		return nil, err
	}
	if r != nil {
		switch {
		case *r < 0 || *r%time.Second != 0:
			return nil, sluice.Errorf(sluice.CodeInvalid, "log_retention %s: want a whole number of seconds, 0 to keep every commit", *r)
		case *r == 0:
		case e.logRetention == 0:
			return nil, sluice.Errorf(sluice.CodeInvalid, "log_retention %s: this server keeps every commit (its log_retention is 0), so a database cannot keep them for less", *r)
		case *r < e.logRetention:
			return nil, sluice.Errorf(sluice.CodeInvalid, "log_retention %s is shorter than the server's (%s): a database may keep its commits longer, not shorter", *r, e.logRetention)
		}
	}
	dd := *d
	if err := e.store.SetLogRetention(ctx, &dd, r); err != nil {
		return nil, err
	}
	e.forgetDatabase(d)
	return &dd, nil
}
