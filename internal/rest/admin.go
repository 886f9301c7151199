package rest

import (
	"net/http"
	"sort"
	"time"

	"github.com/sluice-dev/sluice"
)

// subscriptions serves GET /api/admin/subscriptions (super user only): the
// live stream subscriptions of this process with their own counters. The
// id is the one in the stream's logs and in `: connected sub=<n>`.
func (a *api) subscriptions(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		writeError(w, r, err)
		return
	}
	if !userFrom(r).Superuser {
		writeError(w, r, sluice.Errorf(sluice.CodeForbidden, "only the super user may list subscriptions"))
		return
	}
	if a.Stream.Streams == nil {
		writeError(w, r, sluice.Errorf(sluice.CodeUnavailable, "the change feed is not running"))
		return
	}
	subs := a.Stream.Streams.Subscriptions()
	sort.Slice(subs, func(i, j int) bool { return subs[i].ID < subs[j].ID })
	out := make([]map[string]any, 0, len(subs))
	for _, s := range subs {
		out = append(out, map[string]any{
			"id":        s.ID,
			"database":  s.Database,
			"transport": s.Transport,
			"started":   s.Started.UTC().Format(time.RFC3339Nano),
			"cursor":    s.Cursor,
			"live":      s.Live,
			"commits":   s.Commits,
			"catch_ups": s.CatchUps,
		})
	}
	writeJSON(w, http.StatusOK, out)
}
