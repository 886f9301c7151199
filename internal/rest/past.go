package rest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
)

// versionJSON is one version of a document as /api/history shows it.
type versionJSON struct {
	Position  string  `json:"position"`
	Commit    string  `json:"commit"`
	Author    string  `json:"author"`
	Message   string  `json:"message"`
	User      string  `json:"user"`
	Timestamp float64 `json:"timestamp"`
	Datetime  string  `json:"datetime"`
	Op        string  `json:"op"`
	// Version is the document's version after the change (absent after
	// a delete), as reads answer it and If-Match takes it.
	Version  string          `json:"version,omitempty"`
	Document json.RawMessage `json:"document"`
}

// positionParam returns the position of parameter name, nil when absent.
func positionParam(q url.Values, name string) (*sluice.Position, error) {
	if !q.Has(name) {
		return nil, nil
	}
	p, err := engine.ParsePosition(name, q.Get(name))
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// countParam reads ?count= (default defaultLogCount, at most maxLogCount).
func countParam(q url.Values) (int, error) {
	count, err := boundedParam(q, "count", defaultLogCount, maxLogCount)
	return int(count), err
}

// historyPrunedHeader, on the last page of a document's history, names
// the end of the newest pruned commit when the document existed there:
// its versions before that were pruned (log_retention), and a read as of
// that position shows the oldest state of it that is still known.
const historyPrunedHeader = "Sluice-History-Pruned"

// history lists the versions of one document (?id=), newest first: each
// the change that made it, with its commit and the document after it
// (null for a delete). ?before=<position> pages back; when a page leaves
// older versions out, or stopped reading the log before its start, the
// Link header names the next page. The last page says, in
// Sluice-History-Pruned, when versions before it were pruned.
func (a *api) history(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "id", "count", "before")
	if err != nil {
		writeError(w, r, err)
		return
	}
	count, err := countParam(q)
	if err != nil {
		writeError(w, r, err)
		return
	}
	before, err := positionParam(q, "before")
	if err != nil {
		writeError(w, r, err)
		return
	}
	id := q.Get("id")
	if id == "" {
		writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "query parameter id is required: the document whose history to list"))
		return
	}
	org, name := dbPath(r)
	page, pos, err := a.Engine.DocumentHistory(r.Context(), userFrom(r), org, name, id, before, count, a.PageBytes)
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.Header().Set(positionHeader, pos.String())
	if page.More {
		nextLink(w, r, "before", page.Next.String())
	}
	if page.Pruned != nil {
		w.Header().Set(historyPrunedHeader, page.Pruned.String())
	}
	out := newJSONStream(w)
	out.raw("[")
	for i, c := range page.Versions {
		if i > 0 {
			out.raw(",")
		}
		ch := c.Changes[0]
		doc := orNull(ch.After)
		// The commit's version is the document's only after its last
		// change in the commit: an earlier one's state no read answers,
		// and an If-Match of the version must not take it.
		version := ""
		if ch.Op != sluice.OpDeleted && c.UID != 0 && page.Final[i] {
			version = sluice.VersionOf(c.UID)
		}
		out.value(versionJSON{
			Position:  c.Position(ch.Index).String(),
			Commit:    c.ID(),
			Author:    c.Author,
			Message:   c.Message,
			User:      c.User,
			Timestamp: float64(c.Time.UnixMicro()) / 1e6,
			Datetime:  c.Time.UTC().Format(time.RFC3339Nano),
			Op:        ch.Op.String(),
			Version:   version,
			Document:  doc,
		})
	}
	out.raw("]\n")
	out.done(r)
}

// diffJSON is one document of /api/diff.
type diffJSON struct {
	ID     string          `json:"@id"`
	Type   string          `json:"@type"`
	Op     string          `json:"op"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
	Patch  json.RawMessage `json:"patch"`
}

// diff returns the net difference between the states at two positions
// (?from=, ?to=, now by default): one entry per document that differs,
// by id, each with its images at both positions and the JSON Patch from
// one to the other. ?type= and ?id= narrow it; a page holds at most count
// documents and history_page_bytes of images and patches, "more" says
// whether there is another and "next", only then, is its after=. The Link header names
// the next page with to= set to this page's, so that every page compares
// the same two states however many commits are made meanwhile; the
// answer's position (Sluice-Position) is that to. Fields the diff cannot
// show are left out of every image and named in "hidden_fields" and the
// Sluice-Hidden-Fields header, as a read as of a position names them.
func (a *api) diff(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "from", "to", "type", "id", "count", "after")
	if err != nil {
		writeError(w, r, err)
		return
	}
	typ, err := nameParam(q, "type", "a class's name to diff that class only")
	if err != nil {
		writeError(w, r, err)
		return
	}
	id, err := nameParam(q, "id", "a document's id to diff that document only")
	if err != nil {
		writeError(w, r, err)
		return
	}
	count, err := countParam(q)
	if err != nil {
		writeError(w, r, err)
		return
	}
	from, err := positionParam(q, "from")
	if err == nil && from == nil {
		err = sluice.Errorf(sluice.CodeInvalid, "query parameter from is required: the position to compare with (to, by default now)")
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	to, err := positionParam(q, "to")
	if err != nil {
		writeError(w, r, err)
		return
	}
	org, name := dbPath(r)
	page, pos, err := a.Engine.Diff(r.Context(), userFrom(r), org, name, engine.DiffQuery{
		From: *from, To: to, Type: typ, ID: id, After: q.Get("after"), Count: count, MaxBytes: a.PageBytes,
	})
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.Header().Set(positionHeader, pos.String())
	setHidden(w, page.Hidden)
	if page.More {
		nextLink(w, r, "after", page.Next, "to", page.To.String())
	}
	out := newJSONStream(w)
	out.raw(`{"from":`)
	out.value(page.From.String())
	out.raw(`,"to":`)
	out.value(page.To.String())
	out.raw(`,"position":`)
	out.value(pos.String())
	out.raw(`,"hidden_fields":`)
	out.value(orEmpty(page.Hidden))
	if page.More {
		// Only with a next page: a page's next names a document it
		// shows, or is a sealed cursor (engine.Diff).
		out.raw(`,"next":`)
		out.value(page.Next)
	}
	out.raw(`,"more":` + strconv.FormatBool(page.More) + `,"changes":[`)
	for i, ch := range page.Changes {
		if i > 0 {
			out.raw(",")
		}
		out.value(diffJSON{ID: ch.ID, Type: ch.Type, Op: ch.Op.String(), Before: orNull(ch.Before), After: orNull(ch.After), Patch: ch.Patch})
	}
	out.raw("]}\n")
	out.done(r)
}

// orEmpty returns list, or an empty list for none (a JSON [], not null).
func orEmpty(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

// orNull returns b, or the JSON null for none.
func orNull(b json.RawMessage) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	return b
}
