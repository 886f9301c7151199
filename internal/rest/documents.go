package rest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/jsondup"
	"github.com/sluice-dev/sluice/internal/schema"
)

// positionHeader carries the position a read reflects: every commit up to
// it, none after. A subscription resumed from it (Last-Event-ID) receives
// exactly the commits the read did not see.
const positionHeader = "Sluice-Position"

// hiddenHeader lists, on a read of the past (as_of) or a diff, the
// fields ("Class.field", comma-separated) whose values then cannot be
// shown and that the documents leave out.
const hiddenHeader = "Sluice-Hidden-Fields"

// setReadAt sets the headers saying what a read reflects.
func setReadAt(w http.ResponseWriter, at engine.ReadAt) {
	w.Header().Set(positionHeader, at.Position.String())
	setHidden(w, at.Hidden)
}

// setHidden names the fields an answer leaves out (hiddenHeader), if any.
func setHidden(w http.ResponseWriter, fields []string) {
	if len(fields) > 0 {
		w.Header().Set(hiddenHeader, strings.Join(fields, ", "))
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

// errEmptyID is the error of an id parameter given empty (?id=).
func errEmptyID() error {
	return sluice.Errorf(sluice.CodeInvalid, "query parameter id is empty: give a document's id, or leave id out (a listing, or ids in the body)")
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
	if q.Has("id") && q.Get("id") == "" {
		// Read as no id, it listed the documents, skip and count too.
		writeError(w, r, errEmptyID())
		return
	}
	typ, err := nameParam(q, "type", "a class's name to list that class only")
	if err != nil {
		writeError(w, r, err)
		return
	}
	if id := q.Get("id"); id != "" {
		if q.Has("type") || q.Has("skip") || q.Has("count") {
			writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "id cannot be combined with type, skip or count"))
			return
		}
		privateAnswer(w)
		doc, err := a.Engine.Document(r.Context(), u, org, name, id, asOf)
		if err != nil {
			if doc != nil {
				setReadAt(w, doc.ReadAt) // a 404, at the read's position
			}
			writeError(w, r, err)
			return
		}
		setReadAt(w, doc.ReadAt)
		if doc.Version != "" {
			tag := etag(doc.Version, doc.View)
			w.Header().Set("ETag", tag)
			// If-Match first, then If-None-Match (RFC 9110, 13.2.2).
			if im := r.Header.Values("If-Match"); len(im) > 0 && !matchesStrongETag(im, tag) {
				writeError(w, r, sluice.Errorf(sluice.CodePrecondition, "document %s is at version %s (ETag %s), which If-Match does not name", id, doc.Version, tag))
				return
			}
			if matchesETag(r.Header.Values("If-None-Match"), tag) {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		} else {
			// Read as of a position: no version to write against, so
			// no entity tag; judged as a listing is.
			switch err := untaggedPrecondition(r, "a document read as of a position"); {
			case errors.Is(err, errNotModified):
				w.WriteHeader(http.StatusNotModified)
				return
			case err != nil:
				writeError(w, r, err)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write(append(doc.JSON, '\n'))
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
	// as a JSON error only if nothing was sent yet, and otherwise aborts
	// the answer.
	sent := &countingWriter{w: w}
	bw := bufio.NewWriterSize(sent, 32<<10)
	n := 0
	// The listing's preconditions are judged once the read is authorized
	// and found valid (start), as RFC 9110 (13.2.1) asks.
	var unmet error
	start := func(at engine.ReadAt) {
		setReadAt(w, at)
		unmet = listingPrecondition(r)
	}
	err = a.Engine.Documents(r.Context(), u, org, name, engine.DocumentQuery{Type: typ, Skip: skip, Count: count, AsOf: asOf}, start, func(doc []byte) error {
		if unmet != nil {
			return unmet
		}
		if n == 0 {
			if asList {
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				bw.WriteByte('[')
			} else {
				w.Header().Set("Content-Type", "application/x-ndjson")
				downloadAs(w, name, ".ndjson")
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
	if err == nil {
		err = unmet
	}
	if err != nil {
		if errors.Is(err, errNotModified) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if sent.n == 0 {
			// Nothing reached the client yet (the first 32 KiB wait in
			// bw): the answer can still be the error.
			writeError(w, r, err)
			return
		}
		// Ended normally, the answer would read as a whole listing of
		// fewer documents (NDJSON has no end marker), at a position it
		// does not reflect: abort it, so that the client sees a failed
		// transfer (HTTP/1.1: no last chunk; HTTP/2: a reset stream).
		if r.Context().Err() != nil || sent.err != nil {
			// The client went away (or stopped reading past
			// write_timeout): err is of its leaving, a failed write or
			// the statement cancelled as the request's context ended
			// (which reads as statement_timeout), not a failure of
			// Sluice's, and any client could fill the log with them.
			loggerFrom(r).Debug("document listing ended mid-stream: the client went away", "err", err)
		} else {
			loggerFrom(r).Error("document listing failed mid-stream", "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	if asList {
		if n == 0 {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			bw.WriteByte('[')
		}
		bw.WriteString("]\n")
	} else if n == 0 {
		w.Header().Set("Content-Type", "application/x-ndjson")
		downloadAs(w, name, ".ndjson")
	}
	_ = bw.Flush()
}

// writeOptions checks a write's query parameters (author, message and the
// extra ones given) and headers (If-Match, If-None-Match, Idempotency-Key)
// and returns its options. maxBody bounds what an idempotent retry reads
// of a body only to hash it (0: an NDJSON stream).
func writeOptions(r *http.Request, maxBody int64, extra ...string) (engine.WriteOptions, error) {
	q, err := query(r, append([]string{"author", "message"}, extra...)...)
	if err != nil {
		return engine.WriteOptions{}, err
	}
	opt := engine.WriteOptions{Author: q.Get("author"), Message: q.Get("message")}
	if opt.Create, err = boolParam(q, "create"); err != nil {
		return opt, err
	}
	if opt.Expect, err = precondition(r); err != nil {
		return opt, err
	}
	opt.Idempotency, err = idempotency(r, maxBody)
	return opt, err
}

// bodyLimit returns what bounds a write's body as a whole: MaxBodyBytes,
// except for an NDJSON stream (0), bounded document by document.
func (a *api) bodyLimit(r *http.Request) int64 {
	if mediaType(r) == "application/x-ndjson" {
		return 0
	}
	return a.MaxBodyBytes
}

// documentStream reads the documents of a write's body. A JSON body is
// limited to MaxBodyBytes; an NDJSON stream may be of any length, each of
// its documents limited to MaxBodyBytes. (Every body is bounded in time
// too: see bodies.go.) A large write reads the rest of its body before
// its transaction begins (ReadAhead, spool.go); the caller closes the
// stream once the write is done.
func (a *api) documentStream(w http.ResponseWriter, r *http.Request) (*docStream, error) {
	var s *docStream
	var err error
	if mediaType(r) == "application/x-ndjson" {
		// Read ahead up to MaxBodyBytes; past that, as it arrives.
		s, err = newDocStream(r.Body, a.MaxBodyBytes, r.ContentLength)
		if s != nil {
			s.spoolMax = a.MaxBodyBytes
		}
	} else {
		// Read ahead whole: a body past MaxBodyBytes fails before the
		// write begins.
		s, err = newDocStream(http.MaxBytesReader(w, r.Body, a.MaxBodyBytes), 0, r.ContentLength)
	}
	if err != nil {
		return nil, err
	}
	s.spooler = a.spool
	if u := userFrom(r); u != nil {
		s.user = u.ID
	}
	return s, nil
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

// writeResult answers a write: the ids it wrote, its commit, its
// position (in Sluice-Position too: what a read right after it answers,
// so a stream resumed from it receives exactly the later commits) and the
// version it gave the documents (of a deletion, the version its events
// carry); the version is the ETag too, as the tag of the whole document
// (If-Match takes it whatever view the writer reads), when the write
// inserted, replaced or patched one document. An idempotent retry answers the same, and says
// so in Idempotent-Replayed.
func writeResult(w http.ResponseWriter, res *engine.WriteResult, deleted bool) {
	pos := res.Commit.End().String()
	w.Header().Set(positionHeader, pos)
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if !deleted && len(res.IDs) == 1 {
		w.Header().Set("ETag", etag(res.Commit.Version(), ""))
	}
	writeJSON(w, http.StatusOK, success(map[string]any{
		"ids":      res.IDs,
		"commit":   res.Commit.ID(),
		"position": pos,
		"version":  res.Commit.Version(),
	}))
}

func (a *api) insertDocuments(w http.ResponseWriter, r *http.Request) {
	opt, err := writeOptions(r, a.bodyLimit(r))
	if err != nil {
		writeError(w, r, err)
		return
	}
	src, err := a.documentStream(w, r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer src.Close()
	org, name := dbPath(r)
	res, err := a.Engine.Insert(r.Context(), userFrom(r), org, name, src, opt)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeResult(w, res, false)
}

func (a *api) replaceDocuments(w http.ResponseWriter, r *http.Request) {
	opt, err := writeOptions(r, a.bodyLimit(r), "create")
	if err != nil {
		writeError(w, r, err)
		return
	}
	src, err := a.documentStream(w, r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer src.Close()
	org, name := dbPath(r)
	if opt.Expect.Absent && !opt.Create {
		// If-None-Match: * writes only a new document, which a replace
		// without create=true never does.
		writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "If-None-Match: * writes a document only if it does not exist: add create=true"))
		return
	}
	res, err := a.Engine.Replace(r.Context(), userFrom(r), org, name, src, opt)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeResult(w, res, false)
}

// patchDocument applies a JSON Merge Patch (RFC 7396) to document ?id=.
func (a *api) patchDocument(w http.ResponseWriter, r *http.Request) {
	opt, err := writeOptions(r, a.MaxBodyBytes, "id")
	if err != nil {
		writeError(w, r, err)
		return
	}
	id := r.URL.Query().Get("id")
	if id == "" {
		writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "PATCH patches one document: give ?id=<Class>/<key>"))
		return
	}
	if t := mediaType(r); t != "application/merge-patch+json" && t != "application/json" {
		writeError(w, r, sluice.Errorf(sluice.CodeUnsupportedMedia, "PATCH takes a JSON Merge Patch (RFC 7396): send it with Content-Type: application/merge-patch+json, not %s", sluice.Echo(t)))
		return
	}
	// The role first: a patch of 64 MiB decodes to gigabytes of values
	// ({"text":[0,0,…]}), which a user who may not write must not cost. A
	// writer may send a document that large anyway.
	org, name := dbPath(r)
	if _, _, err := a.Engine.Database(r.Context(), userFrom(r), org, name, sluice.RoleWrite); err != nil {
		writeError(w, r, err)
		return
	}
	// Charged to the write budget before it is decoded, as a document of
	// a POST or PUT is (engine.WriteCharge), until the write is done: its
	// length when the request gives it, else as it is read. The patch
	// grows the charge by the stored document before it reads it
	// (engine.Engine.Patch).
	charge := a.Engine.ChargeWrite(userFrom(r))
	defer charge.Release()
	opt.Charge = charge
	body := io.Reader(http.MaxBytesReader(w, r.Body, a.MaxBodyBytes))
	if r.ContentLength >= 0 {
		if err := charge.Grow(r.Context(), min(r.ContentLength, a.MaxBodyBytes)); err != nil {
			refuseUnread(w, r, err)
			return
		}
	} else {
		body = &chargedBody{ctx: r.Context(), r: body, charge: charge}
	}
	// Counted as it is read, before it is decoded (schema.LimitValues): a
	// patch holds no more values than a document (and its own object).
	// The text read is kept too, to find a member given twice after it
	// decoded (encoding/json keeps the last).
	var text bytes.Buffer
	dec := json.NewDecoder(io.TeeReader(schema.LimitValues(body, schema.MaxValues+1, "the patch"), &text))
	dec.UseNumber()
	var v any
	err = dec.Decode(&v)
	patch, isObject := v.(map[string]any)
	if err != nil && !errors.Is(err, io.EOF) {
		writeError(w, r, bodyError(err))
		return
	}
	if !isObject {
		writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "a merge patch is a JSON object of the fields to change (null removes one)"))
		return
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		_, failed := errors.AsType[*sluice.Error](err) // invalid UTF-8
		_, tooLarge := errors.AsType[*http.MaxBytesError](err)
		if failed || tooLarge {
			err = bodyError(err)
		} else {
			err = sluice.Errorf(sluice.CodeInvalid, "invalid JSON body: data after the patch object")
		}
		writeError(w, r, err)
		return
	}
	if rep, ok := jsondup.Find(text.Bytes()); ok {
		writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "invalid JSON: %s", rep.Message()))
		return
	}
	res, err := a.Engine.Patch(r.Context(), userFrom(r), org, name, []engine.Patch{{ID: id, Fields: patch}}, opt)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeResult(w, res, false)
}

// deleteDocuments takes ?id=<id> or a body with a JSON array of ids (or
// one id as a JSON string); an element of the array may be an object
// {"@id": id, "@version": version}, to delete the document only at that
// version.
func (a *api) deleteDocuments(w http.ResponseWriter, r *http.Request) {
	opt, err := writeOptions(r, a.MaxBodyBytes, "id")
	if err != nil {
		writeError(w, r, err)
		return
	}
	var ids []string
	var expect []sluice.Precondition
	org, name := dbPath(r)
	if q := r.URL.Query(); q.Has("id") && q.Get("id") == "" {
		writeError(w, r, errEmptyID())
		return
	}
	if id := r.URL.Query().Get("id"); id != "" {
		// A body is ids to delete too: with ?id= the request is
		// ambiguous, refused before anything is deleted rather than
		// deleting ?id= alone and ignoring the body. The role first,
		// as for a body of ids: a user who may not write is refused
		// (403) without any of it read.
		if mayHaveBody(r) {
			if _, _, err := a.Engine.Database(r.Context(), userFrom(r), org, name, sluice.RoleWrite); err != nil {
				writeError(w, r, err)
				return
			}
			has, err := hasBody(r)
			if err != nil {
				writeError(w, r, bodyError(err))
				return
			}
			if has {
				refuseUnread(w, r, errIDAndBody())
				return
			}
		}
		ids = []string{id}
	} else {
		// The role first: a body of 64 MiB of "" decodes to 22 million
		// ids, gigabytes, which a user who may not write must not cost.
		if _, _, err := a.Engine.Database(r.Context(), userFrom(r), org, name, sluice.RoleWrite); err != nil {
			writeError(w, r, err)
			return
		}
		if ids, expect, err = deleteBody(http.MaxBytesReader(w, r.Body, a.MaxBodyBytes), a.Engine.CheckWriteCount); err != nil {
			writeError(w, r, err)
			return
		}
	}
	res, err := a.Engine.Delete(r.Context(), userFrom(r), org, name, ids, expect, opt)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeResult(w, res, true)
}

// errIDAndBody is the error of a DELETE with ?id= and a body.
func errIDAndBody() error {
	return sluice.Errorf(sluice.CodeInvalid, "a DELETE gives the ids to delete either in ?id= or in its body, not both: this one has ?id= and a body")
}

// mayHaveBody reports whether r may carry a body: it has one that is not
// announced empty (hasBody tells).
func mayHaveBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// hasBody reports whether r carries a body of at least one byte. A body
// announced by Content-Length is one without being read; one of unknown
// length (chunked, or HTTP/2) is read for its first byte, within the
// body's deadlines (bodyLimits): an empty one is none, as a proxy may
// send one for a client that sent no body.
func hasBody(r *http.Request) (bool, error) {
	if !mayHaveBody(r) {
		return false, nil
	}
	if r.ContentLength > 0 {
		return true, nil
	}
	var b [1]byte
	_, err := io.ReadAtLeast(r.Body, b[:], 1)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, io.EOF):
		return false, nil
	}
	return false, err
}

// deleteBody reads the body of a DELETE: a JSON array whose elements are
// ids or {"@id", "@version"} objects, or one id as a JSON string. It
// returns the ids and, when any element has a version, every element's
// precondition. An element that is neither is refused naming its index
// and what is wrong with it. It reads the array element by element and
// asks count (when not nil) about each new number of ids, so that a
// body of more ids than a write may hold is refused at the first one
// too many, not decoded whole first.
func deleteBody(body io.Reader, count func(n int64) error) ([]string, []sluice.Precondition, error) {
	dec := json.NewDecoder(body)
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, deleteBodyError(err)
	}
	var ids []string
	var expect []sluice.Precondition
	versions := false
	switch tok := tok.(type) {
	case string:
		ids = []string{tok}
	case json.Delim:
		if tok != '[' {
			return nil, nil, errDeleteBody
		}
		for i := 0; dec.More(); i++ {
			if count != nil {
				if err := count(int64(i + 1)); err != nil {
					return nil, nil, err
				}
			}
			var it json.RawMessage
			if err := dec.Decode(&it); err != nil {
				return nil, nil, deleteBodyError(err)
			}
			var id string
			if json.Unmarshal(it, &id) == nil {
				ids, expect = append(ids, id), append(expect, sluice.Precondition{})
				continue
			}
			id, version, err := deleteElement(it)
			if err != nil {
				return nil, nil, sluice.Errorf(sluice.CodeInvalid, `the DELETE body's element %d (counting from 0): %s; an element is a document id or {"@id": id, "@version": version}`, i, err)
			}
			ids, expect = append(ids, id), append(expect, sluice.Precondition{})
			if version != "" {
				expect[i].Version, versions = version, true
			}
		}
		if _, err := dec.Token(); err != nil { // the closing bracket
			return nil, nil, deleteBodyError(err)
		}
		if ids == nil {
			ids = []string{}
		}
	default:
		return nil, nil, errDeleteBody
	}
	// Token, not More: an error reading the rest (invalid UTF-8, a body
	// past its bound) is that error.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err == nil {
			return nil, nil, errDeleteBody // data after the value
		}
		return nil, nil, deleteBodyError(err)
	}
	if !versions {
		expect = nil
	}
	return ids, expect, nil
}

// deleteBodyError is the error of a DELETE body that could not be read
// (bodyError: too large, invalid UTF-8) or is not JSON of the shape it
// must have (errDeleteBody).
func deleteBodyError(err error) error {
	if _, ok := errors.AsType[*sluice.Error](err); ok {
		return err
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return bodyError(err)
	}
	return errDeleteBody
}

// deleteElement reads an element of a DELETE body that is not an id: an
// object of "@id" and, optionally, "@version" (null: none). The error
// says what is wrong, for deleteBody to name the element.
func deleteElement(it json.RawMessage) (id, version string, err error) {
	var members map[string]json.RawMessage
	if json.Unmarshal(it, &members) != nil {
		return "", "", fmt.Errorf("expected a string or an object, got %s", jsonKind(it))
	}
	if rep, ok := jsondup.Find(it); ok {
		return "", "", errors.New(rep.Message())
	}
	for name := range members {
		if name != "@id" && name != "@version" {
			return "", "", fmt.Errorf("unknown member %s", sluice.Echo(name))
		}
	}
	raw, ok := members["@id"]
	if !ok {
		return "", "", errors.New(`"@id" is missing`)
	}
	if k := jsonKind(raw); k != "a string" && k != "an empty string" || json.Unmarshal(raw, &id) != nil {
		return "", "", fmt.Errorf(`"@id" must be a string, got %s`, jsonKind(raw))
	}
	if raw, ok := members["@version"]; ok && jsonKind(raw) != "null" {
		if json.Unmarshal(raw, &version) != nil || version == "" {
			return "", "", fmt.Errorf(`"@version" must be a version string as Sluice gave it (or null), got %s`, jsonKind(raw))
		}
	}
	return id, version, nil
}

// jsonKind names the kind of a JSON value, for an error: "a string",
// "an empty string", "a number", "an object", "an array", "true",
// "false" or "null".
func jsonKind(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0:
		return "nothing"
	case string(v) == `""`:
		return "an empty string"
	case v[0] == '"':
		return "a string"
	case v[0] == '{':
		return "an object"
	case v[0] == '[':
		return "an array"
	case string(v) == "true" || string(v) == "false" || string(v) == "null":
		return string(v)
	}
	return "a number"
}

var errDeleteBody = sluice.Errorf(sluice.CodeInvalid, `give ?id=<id> or a body with a JSON array of document ids, or of {"@id": id, "@version": version} objects to delete documents only at those versions`)

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
	// err is the first failed write: the client went away or stalled.
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// chargedBody is a body of unknown length that charges what is read of
// it to a write charge before it reads it: up to the next chargeStep
// bytes past what it has read, so that the budget is not taken for every
// read of the decoder.
type chargedBody struct {
	ctx    context.Context
	r      io.Reader
	charge *engine.WriteCharge
	read   int64
}

// chargeStep is how much more a chargedBody charges at a time.
const chargeStep = 64 << 10

func (b *chargedBody) Read(p []byte) (int, error) {
	if err := b.charge.Grow(b.ctx, (b.read+int64(len(p))+chargeStep-1)/chargeStep*chargeStep); err != nil {
		return 0, err
	}
	n, err := b.r.Read(p)
	b.read += int64(n)
	return n, err
}
