package rest

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
)

const (
	defaultLogCount = 100
	maxLogCount     = 1000
)

func commitJSON(c *sluice.Commit) map[string]any {
	out := map[string]any{
		"id":        c.ID(),
		"author":    c.Author,
		"message":   c.Message,
		"user":      c.User,
		"timestamp": float64(c.Time.UnixMicro()) / 1e6,
		"datetime":  c.Time.UTC().Format(time.RFC3339Nano),
		"changes":   c.NumChanges,
	}
	if c.NumChanges > 0 {
		out["position"] = c.Position(c.NumChanges - 1).String()
	}
	return out
}

// log lists commits newest first. ?before=<commit id> pages back.
func (a *api) log(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "count", "before")
	if err != nil {
		writeError(w, r, err)
		return
	}
	count, err := intParam(q, "count", defaultLogCount)
	if err == nil && (count < 1 || count > maxLogCount) {
		err = sluice.Errorf(sluice.CodeInvalid, "query parameter count=%d: want 1 to %d", count, maxLogCount)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	before, err := intParam(q, "before", 0)
	if err != nil {
		writeError(w, r, err)
		return
	}
	org, name := dbPath(r)
	_, cs, err := a.Engine.Log(r.Context(), userFrom(r), org, name, before, int(count))
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(cs))
	for _, c := range cs {
		out = append(out, commitJSON(c))
	}
	writeJSON(w, http.StatusOK, out)
}

// changes returns the history after a position, oldest first, for catch-up.
// ?after= takes a stream position (an SSE event id) or a commit id; absent
// means from the start of retained history.
func (a *api) changes(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "after", "limit")
	if err != nil {
		writeError(w, r, err)
		return
	}
	limit, err := intParam(q, "limit", defaultLogCount)
	if err == nil && (limit < 1 || limit > maxLogCount) {
		err = sluice.Errorf(sluice.CodeInvalid, "query parameter limit=%d: want 1 to %d", limit, maxLogCount)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	var after sluice.Position
	if s := q.Get("after"); s != "" {
		if seq, err := strconv.ParseInt(s, 10, 64); err == nil && seq >= 0 {
			after = sluice.Position{Seq: seq, Index: engine.MaxIndex}
		} else if after, err = sluice.ParsePosition(s); err != nil {
			writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "query parameter after=%q: want a stream position or a commit id", s))
			return
		}
	}
	org, name := dbPath(r)
	_, cs, err := a.Engine.Changes(r.Context(), userFrom(r), org, name, after, int(limit))
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(cs))
	for _, c := range cs {
		cj := commitJSON(c)
		changes := make([]map[string]any, 0, len(c.Changes))
		for _, ch := range c.Changes {
			changes = append(changes, map[string]any{
				"position": c.Position(ch.Index).String(),
				"type":     ch.Class,
				"id":       ch.DocID,
				"op":       ch.Op.String(),
				"before":   ch.Before,
				"after":    ch.After,
			})
		}
		cj["changes"] = changes
		cj["changes_count"] = c.NumChanges
		out = append(out, cj)
	}
	writeJSON(w, http.StatusOK, out)
}
