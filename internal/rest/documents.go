package rest

import (
	"bufio"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
)

// positionHeader carries the position a read reflects: every commit up to
// it, none after. A subscription resumed from it (Last-Event-ID) receives
// exactly the commits the read did not see.
const positionHeader = "Sluice-Position"

// hiddenHeader lists, on a read of the past (as_of), the fields
// ("Class.field", comma-separated) whose values then cannot be shown and
// that the documents leave out.
const hiddenHeader = "Sluice-Hidden-Fields"

// setReadAt sets the headers saying what a read reflects.
func setReadAt(w http.ResponseWriter, at engine.ReadAt) {
	w.Header().Set(positionHeader, at.Position.String())
	if len(at.Hidden) > 0 {
		w.Header().Set(hiddenHeader, strings.Join(at.Hidden, ", "))
	}
}

// asOfParam returns the position of the as_of parameter, nil when absent.
func asOfParam(q url.Values) (*sluice.Position, error) {
	if !q.Has("as_of") {
		return nil, nil
	}
	p, err := engine.ParsePosition("as_of", q.Get("as_of"))
	if err != nil {
		return nil, err
	}
	return &p, nil
}

func (a *api) getDocuments(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "id", "type", "skip", "count", "as_list", "as_of")
	if err != nil {
		writeError(w, r, err)
		return
	}
	asOf, err := asOfParam(q)
	if err != nil {
		writeError(w, r, err)
		return
	}
	org, name := dbPath(r)
	u := userFrom(r)
	if id := q.Get("id"); id != "" {
		if q.Has("type") || q.Has("skip") || q.Has("count") {
			writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "id cannot be combined with type, skip or count"))
			return
		}
		doc, at, err := a.Engine.Document(r.Context(), u, org, name, id, asOf)
		if err != nil {
			writeError(w, r, err)
			return
		}
		setReadAt(w, at)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write(append(doc, '\n'))
		return
	}
	skip, err := intParam(q, "skip", 0)
	if err != nil {
		writeError(w, r, err)
		return
	}
	count, err := intParam(q, "count", -1)
	if err != nil {
		writeError(w, r, err)
		return
	}
	asList, err := boolParam(q, "as_list")
	if err != nil {
		writeError(w, r, err)
		return
	}
	// Documents stream out as they are read; the first error is reported
	// as a JSON error only if nothing was written yet.
	bw := bufio.NewWriterSize(w, 32<<10)
	n := 0
	start := func(at engine.ReadAt) { setReadAt(w, at) }
	err = a.Engine.Documents(r.Context(), u, org, name, engine.DocumentQuery{Type: q.Get("type"), Skip: skip, Count: count, AsOf: asOf}, start, func(doc []byte) error {
		if n == 0 {
			if asList {
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				bw.WriteByte('[')
			} else {
				w.Header().Set("Content-Type", "application/x-ndjson")
			}
		} else if asList {
			bw.WriteByte(',')
		}
		n++
		_, err := bw.Write(doc)
		if !asList {
			bw.WriteByte('\n')
		}
		return err
	})
	if err != nil {
		if n == 0 {
			writeError(w, r, err)
			return
		}
		loggerFrom(r).Error("document listing failed mid-stream", "err", err)
		return // the client sees a truncated body
	}
	if asList {
		if n == 0 {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			bw.WriteByte('[')
		}
		bw.WriteString("]\n")
	} else if n == 0 {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
	_ = bw.Flush()
}

// writeOptions checks a write's query parameters (author, message and the
// extra ones given) and returns its options.
func writeOptions(r *http.Request, extra ...string) (engine.WriteOptions, error) {
	q, err := query(r, append([]string{"author", "message"}, extra...)...)
	if err != nil {
		return engine.WriteOptions{}, err
	}
	opt := engine.WriteOptions{Author: q.Get("author"), Message: q.Get("message")}
	opt.Create, err = boolParam(q, "create")
	return opt, err
}

// documentStream reads the documents of a write's body. A JSON body is
// limited to MaxBodyBytes; an NDJSON stream may be of any length, each of
// its documents limited to MaxBodyBytes. (Every body is bounded in time
// too: see bodies.go.)
func (a *api) documentStream(w http.ResponseWriter, r *http.Request) (*docStream, error) {
	if mediaType(r) == "application/x-ndjson" {
		return newDocStream(r.Body, a.MaxBodyBytes)
	}
	return newDocStream(http.MaxBytesReader(w, r.Body, a.MaxBodyBytes), 0)
}

// mediaType returns the request's media type, without parameters, even
// when they are malformed.
func mediaType(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if t, _, err := mime.ParseMediaType(ct); err == nil {
		return t
	}
	t, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(t))
}

func writeResult(w http.ResponseWriter, status int, res *engine.WriteResult) {
	writeJSON(w, status, success(map[string]any{
		"ids":    res.IDs,
		"commit": res.Commit.ID(),
	}))
}

func (a *api) insertDocuments(w http.ResponseWriter, r *http.Request) {
	opt, err := writeOptions(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	src, err := a.documentStream(w, r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	org, name := dbPath(r)
	res, err := a.Engine.Insert(r.Context(), userFrom(r), org, name, src, opt)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeResult(w, http.StatusOK, res)
}

func (a *api) replaceDocuments(w http.ResponseWriter, r *http.Request) {
	opt, err := writeOptions(r, "create")
	if err != nil {
		writeError(w, r, err)
		return
	}
	src, err := a.documentStream(w, r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	org, name := dbPath(r)
	res, err := a.Engine.Replace(r.Context(), userFrom(r), org, name, src, opt)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeResult(w, http.StatusOK, res)
}

// deleteDocuments takes ?id=<id> or a body with a JSON array of ids (or
// one id as a JSON string).
func (a *api) deleteDocuments(w http.ResponseWriter, r *http.Request) {
	opt, err := writeOptions(r, "id")
	if err != nil {
		writeError(w, r, err)
		return
	}
	var ids []string
	if id := r.URL.Query().Get("id"); id != "" {
		ids = []string{id}
	} else {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.MaxBodyBytes))
		if err != nil {
			writeError(w, r, bodyError(err))
			return
		}
		if err := json.Unmarshal(body, &ids); err != nil {
			var one string
			if json.Unmarshal(body, &one) != nil {
				writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "give ?id=<id> or a body with a JSON array of document ids"))
				return
			}
			ids = []string{one}
		}
	}
	org, name := dbPath(r)
	res, err := a.Engine.Delete(r.Context(), userFrom(r), org, name, ids, opt)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeResult(w, http.StatusOK, res)
}
