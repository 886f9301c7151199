package daemon

import (
	"context"

	"github.com/sluice-dev/sluice/internal/changefeed"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// feedStore is the change feed's view of Postgres: *postgres.DB with its
// listener behind the changefeed.Listener interface.
type feedStore struct{ *postgres.DB }

func (s feedStore) Listen(ctx context.Context) (changefeed.Listener, error) {
	l, err := s.DB.Listen(ctx)
	if err != nil {
		return nil, err // not a nil *Listener in an interface
	}
	return l, nil
}
