package rest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
)

const (
	defaultLogCount = 100
	maxLogCount     = 1000
)

// commitHead is a commit as /api/log and /api/changes show it.
type commitHead struct {
	ID        string  `json:"id"`
	Author    string  `json:"author"`
	Message   string  `json:"message"`
	User      string  `json:"user"`
	Timestamp float64 `json:"timestamp"`
	Datetime  string  `json:"datetime"`
	// Position is the position of the commit's last change.
	Position string `json:"position,omitempty"`
	// Changes counts the commit's changes (/api/log only).
	Changes *int `json:"changes,omitempty"`
	// ChangesCount counts the commit's changes (/api/changes only, where
	// "changes" lists them).
	ChangesCount *int `json:"changes_count,omitempty"`
}

func newCommitHead(c *sluice.Commit) commitHead {
	h := commitHead{
		ID:        c.ID(),
		Author:    c.Author,
		Message:   c.Message,
		User:      c.User,
		Timestamp: float64(c.Time.UnixMicro()) / 1e6,
		Datetime:  c.Time.UTC().Format(time.RFC3339Nano),
	}
	if c.NumChanges > 0 {
		h.Position = c.Position(c.NumChanges - 1).String()
	}
	return h
}

// changeJSON is one change as /api/changes shows it.
type changeJSON struct {
	Position string          `json:"position"`
	Type     string          `json:"type"`
	ID       string          `json:"id"`
	Op       string          `json:"op"`
	Before   json.RawMessage `json:"before"`
	After    json.RawMessage `json:"after"`
}

// jsonStream writes a JSON document piece by piece: pages of history are
// written as they are encoded, never built whole as one value. Write
// errors mean the client went away; encoding errors are kept for done.
type jsonStream struct {
	w   *bufio.Writer
	buf bytes.Buffer
	enc *json.Encoder
	err error
}

func newJSONStream(w http.ResponseWriter) *jsonStream {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	s := &jsonStream{w: bufio.NewWriterSize(w, 32<<10)}
	s.enc = json.NewEncoder(&s.buf)
	s.enc.SetEscapeHTML(false)
	return s
}

// raw writes JSON text as it is.
func (s *jsonStream) raw(text string) {
	if s.err == nil {
		_, _ = s.w.WriteString(text)
	}
}

// encode returns v as compact JSON, without the Encoder's newline.
func (s *jsonStream) encode(v any) []byte {
	if s.err != nil {
		return nil
	}
	s.buf.Reset()
	if s.err = s.enc.Encode(v); s.err != nil {
		return nil
	}
	return bytes.TrimSuffix(s.buf.Bytes(), []byte("\n"))
}

// value writes v.
func (s *jsonStream) value(v any) {
	if b := s.encode(v); b != nil {
		_, _ = s.w.Write(b)
	}
}

// objectOpen writes v, a struct, as an object left open for more members.
func (s *jsonStream) objectOpen(v any) {
	if b := s.encode(v); b != nil {
		_, _ = s.w.Write(b[:len(b)-1]) // without its "}"
	}
}

// done flushes the document. After an encoding error, which leaves it
// incomplete, it logs the error and aborts the response, so that the
// client sees a failed transfer rather than a document that parses.
func (s *jsonStream) done(r *http.Request) {
	if s.err != nil {
		loggerFrom(r).Error("encode response", "err", s.err)
		panic(http.ErrAbortHandler)
	}
	_ = s.w.Flush()
}

// nextLink sets the Link header (RFC 8288) to this request's URL with
// the given parameters (name, value, name, value…) set: the next page.
func nextLink(w http.ResponseWriter, r *http.Request, params ...string) {
	u := *r.URL
	q := u.Query()
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	u.RawQuery = q.Encode()
	w.Header().Set("Link", "<"+u.RequestURI()+`>; rel="next"`)
}

// log lists commits newest first. ?before=<commit id> pages back. A page
// holds at most count commits and history_page_bytes of commit text; when
// it leaves older commits out, the Link header names the next page.
func (a *api) log(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "count", "before")
	if err != nil {
		writeError(w, r, err)
		return
	}
	count, err := boundedParam(q, "count", defaultLogCount, maxLogCount)
	if err != nil {
		writeError(w, r, err)
		return
	}
	// before is a commit id (ids start at 1); absent, the page starts
	// at the newest commit. before=0 answered that page too, as if it
	// were absent, where the commits before commit 0 are none.
	before, err := boundedParam(q, "before", 0, math.MaxInt64)
	if err != nil {
		writeError(w, r, err)
		return
	}
	org, name := dbPath(r)
	page, pos, err := a.Engine.Log(r.Context(), userFrom(r), org, name, before, int(count), a.PageBytes)
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.Header().Set(positionHeader, pos.String())
	if page.More {
		nextLink(w, r, "before", page.Commits[len(page.Commits)-1].ID())
	}
	out := newJSONStream(w)
	out.raw("[")
	for i, c := range page.Commits {
		if i > 0 {
			out.raw(",")
		}
		h := newCommitHead(c)
		h.Changes = &c.NumChanges
		out.value(h)
	}
	out.raw("]\n")
	out.done(r)
}

// changes returns the history after a position, oldest first, for catch-up.
// ?after= takes a stream position (an SSE event id) or a commit id; absent
// means from the start of retained history. A page holds at most limit
// commits and history_page_bytes of change images, so a large commit spans
// pages; the answer's "next" is the after= of the next page and "more"
// says whether there is one yet.
func (a *api) changes(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "after", "limit")
	if err != nil {
		writeError(w, r, err)
		return
	}
	limit, err := boundedParam(q, "limit", defaultLogCount, maxLogCount)
	if err != nil {
		writeError(w, r, err)
		return
	}
	after := sluice.Position{Index: engine.MaxIndex} // commit 0: the start
	next := "0"
	if q.Has("after") {
		s := q.Get("after")
		if s == "" {
			// A client's lost cursor: read from the start, it would
			// take every commit again for the ones after its cursor.
			writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "query parameter after is empty: want a position (a page's next, an event id) or a commit id, or leave after out to read from the start"))
			return
		}
		next = s
		if seq, err := strconv.ParseInt(s, 10, 64); err == nil && seq >= 0 {
			after = sluice.Position{Seq: seq, Index: engine.MaxIndex}
		} else if after, err = sluice.ParsePosition(s); err != nil {
			msg := fmt.Sprintf("query parameter after=%s: want a stream position or a commit id", sluice.Echo(s))
			if n := strings.Count(s, "-"); n == 2 || n == 3 {
				msg = "query parameter after: " + sluice.ErrorMessage(err) // a position, wrong
			}
			writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "%s", msg))
			return
		}
	}
	org, name := dbPath(r)
	page, pos, err := a.Engine.Changes(r.Context(), userFrom(r), org, name, after, int(limit), a.PageBytes)
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.Header().Set(positionHeader, pos.String())
	if len(page.Commits) > 0 {
		next = page.Next.String()
	}
	if page.More {
		nextLink(w, r, "after", next)
	}
	out := newJSONStream(w)
	out.raw(`{"next":`)
	out.value(next)
	out.raw(`,"more":` + strconv.FormatBool(page.More) + `,"position":`)
	out.value(pos.String())
	out.raw(`,"commits":[`)
	for i, c := range page.Commits {
		if i > 0 {
			out.raw(",")
		}
		h := newCommitHead(c)
		h.ChangesCount = &c.NumChanges
		out.objectOpen(h)
		out.raw(`,"changes":[`)
		for j, ch := range c.Changes {
			if j > 0 {
				out.raw(",")
			}
			out.value(changeJSON{
				Position: c.Position(ch.Index).String(),
				Type:     ch.Class,
				ID:       ch.DocID,
				Op:       ch.Op.String(),
				Before:   ch.Before,
				After:    ch.After,
			})
		}
		out.raw("]}")
	}
	out.raw("]}\n")
	out.done(r)
}
