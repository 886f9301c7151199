package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/jsondup"
	"github.com/sluice-dev/sluice/internal/schema"
)

// docStream reads the documents of a write request body: one JSON object,
// a JSON array of objects (streamed element by element), or NDJSON (any
// number of objects separated by whitespace). It implements
// engine.DocSource.
//
// It splits the body into documents itself, in one pass that follows only
// strings and nesting, and leaves checking each document's syntax to
// schema.RawDocument.Validate, whose flat-object path reads the bytes once
// more while it validates. encoding/json's Decoder read every byte twice on
// top of that, and was the largest CPU cost of a bulk write's body.
type docStream struct {
	r   io.Reader
	buf []byte // buf[pos:] has been read from r but not returned
	pos int
	// rerr is r's error once it failed or ended (io.EOF).
	rerr    error
	inArray bool
	// more is set, in an array, after an element: a ',' or the closing
	// ']' comes next.
	more bool
	done bool
	n    int
	// maxDoc, when not 0, is the largest document a stream may hold: an
	// NDJSON stream is not limited as a whole, but none of its documents
	// may grow the buffer without bound.
	maxDoc int64
	// first is the size of the first buffer: minReadSize, or less for a
	// body known to be shorter.
	first int
	// spooler holds the rest of r for user when ReadAhead asks (nil: it
	// is read as it arrives), up to spoolMax bytes (0: all of it);
	// spooled is what it holds.
	spooler  *spooler
	user     int64
	spoolMax int64
	spooled  *spooledBody
	// size is the body's announced length (-1: unknown); got counts the
	// bytes read of it.
	size, got int64
	// lines counts the newlines before buf[lineAt], for the line numbers
	// of an NDJSON body (lineOf); an array's are not counted.
	lines, lineAt int
}

// lineOf returns the line (from 1) of buf[i], i at or after the last one
// asked about.
func (s *docStream) lineOf(i int) int {
	s.lines += bytes.Count(s.buf[s.lineAt:i], []byte{'\n'})
	s.lineAt = i
	return s.lines + 1
}

// where says where buf[i] is in the body, for an error: its byte, and its
// line in NDJSON.
func (s *docStream) where(i int) string {
	at := fmt.Sprintf("at byte %d (counting from 0) of the body", s.got-int64(len(s.buf))+int64(i))
	if !s.inArray {
		at += fmt.Sprintf(", line %d", s.lineOf(i))
	}
	return at
}

// ReadAhead reads the rest of the body, up to the spool's bounds, before
// a large write's transaction begins, so that a slow client does not keep
// the transaction open (spool.go). An error is the body's.
func (s *docStream) ReadAhead() error {
	if s.spooler == nil || s.spooled != nil || s.rerr != nil {
		return nil
	}
	left := int64(-1) // what the body has left: unknown
	if s.size >= 0 {
		left = max(s.size-s.got, 0)
	}
	sb, err := s.spooler.spool(s.r, s.user, s.spoolMax, left)
	if err != nil {
		s.rerr = bodyError(err)
		return s.rerr
	}
	s.r, s.spooled = sb, sb
	return nil
}

// Close gives back what ReadAhead holds.
func (s *docStream) Close() { s.spooled.Close() }

// The stream's buffer starts at minReadSize, since most bodies are one small
// document (a larger first buffer, allocated per request, slowed concurrent
// single-document writes: docs/benchmarks.md, "Measured choices in the code"),
// or at the body's length and one byte when that is known and smaller (the
// byte leaves room for the end of the body to be read with its last bytes:
// a body of one small document then costs one buffer of its own size), and
// doubles on each refill up to readSize. Beyond that only a document larger
// than the buffer grows it.
const (
	minReadSize = 4 << 10
	readSize    = 32 << 10
)

// newDocStream reads the documents of body; maxDoc (0: none) limits the
// size of each. size is the body's length when known (a request's
// Content-Length), -1 when not: it only sizes the first buffer.
func newDocStream(body io.Reader, maxDoc, size int64) (*docStream, error) {
	s := &docStream{r: body, maxDoc: maxDoc, first: minReadSize, size: size}
	if size >= 0 && size < minReadSize {
		s.first = int(size) + 1
	}
	first, err := s.peek()
	switch {
	case errors.Is(err, io.EOF):
		return nil, sluice.Errorf(sluice.CodeInvalid, "the request body is empty: send a JSON object, an array of objects or NDJSON")
	case err != nil:
		return nil, bodyError(err)
	case first == '[':
		s.pos++
		s.inArray = true
	case first != '{':
		return nil, sluice.Errorf(sluice.CodeInvalid, "the request body must be a JSON object, an array of objects or NDJSON, not one starting with %q", first)
	}
	return s, nil
}

// fill reads more of the body after buf's end, first moving the unread
// bytes to the front. It returns the reader's error once it has none left.
func (s *docStream) fill() error {
	if s.rerr != nil {
		return s.rerr
	}
	if s.pos > 0 {
		if !s.inArray {
			s.lineOf(s.pos)
		}
		n := copy(s.buf, s.buf[s.pos:])
		s.buf, s.pos, s.lineAt = s.buf[:n], 0, 0
	}
	// What is left unread is part of one document (fill is called only
	// while a document or the space before it is read).
	if s.maxDoc > 0 && int64(len(s.buf)) >= s.maxDoc {
		return s.tooLarge()
	}
	switch {
	case s.buf == nil:
		s.buf = make([]byte, 0, s.first)
	case cap(s.buf) < readSize || len(s.buf) == cap(s.buf):
		s.buf = append(make([]byte, 0, max(minReadSize, 2*cap(s.buf))), s.buf...)
	}
	n, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
	s.buf = s.buf[:len(s.buf)+n]
	s.got += int64(n)
	if err != nil {
		s.rerr = err
		if n == 0 {
			return err
		}
	}
	return nil
}

// peek skips whitespace and returns the next byte, without consuming it,
// or the reader's error (io.EOF at the end of the body).
func (s *docStream) peek() (byte, error) {
	for {
		for s.pos < len(s.buf) {
			switch c := s.buf[s.pos]; c {
			case ' ', '\t', '\r', '\n':
				s.pos++
			default:
				return c, nil
			}
		}
		if err := s.fill(); err != nil {
			return 0, err
		}
	}
}

// Next returns the next document's JSON text or io.EOF. The text is valid
// until the following call.
func (s *docStream) Next() (schema.RawDocument, error) {
	if s.done {
		return schema.RawDocument{}, io.EOF
	}
	c, err := s.peek()
	if s.inArray {
		if errors.Is(err, io.EOF) {
			return schema.RawDocument{}, s.notClosed()
		}
		if err != nil {
			return schema.RawDocument{}, bodyError(err)
		}
		if c == ']' {
			s.pos++
			s.done = true
			return schema.RawDocument{}, s.expectEOF()
		}
		if s.more {
			if c != ',' {
				return schema.RawDocument{}, sluice.Errorf(sluice.CodeInvalid, "document %d: invalid JSON: an unexpected character %q after an array element %s: a comma or ] comes next", s.n, c, s.where(s.pos))
			}
			s.pos++
			if c, err = s.peek(); errors.Is(err, io.EOF) {
				return schema.RawDocument{}, s.notClosed()
			}
		}
	} else if errors.Is(err, io.EOF) {
		s.done = true
		return schema.RawDocument{}, io.EOF
	}
	if err != nil {
		return schema.RawDocument{}, bodyError(err)
	}
	if c != '{' {
		if strings.IndexByte(`["-0123456789tfn`, c) >= 0 {
			return schema.RawDocument{}, sluice.Errorf(sluice.CodeInvalid, "document %d: not a JSON object", s.n)
		}
		return schema.RawDocument{}, sluice.Errorf(sluice.CodeInvalid, "document %d: invalid JSON: an unexpected character %q %s", s.n, c, s.where(s.pos))
	}
	// The line of a document of NDJSON, for its errors: not for a body
	// that is one object on its first line.
	line := 0
	if !s.inArray {
		if line = s.lineOf(s.pos); s.n == 0 && line == 1 {
			line = 0
		}
	}
	n, err := s.valueLen()
	if errors.Is(err, io.EOF) {
		return schema.RawDocument{}, sluice.Errorf(sluice.CodeInvalid, "document %d: invalid JSON: it ends before it is complete", s.n)
	}
	if err != nil {
		return schema.RawDocument{}, bodyError(err)
	}
	if s.maxDoc > 0 && int64(n) > s.maxDoc {
		return schema.RawDocument{}, s.tooLarge()
	}
	doc := s.buf[s.pos : s.pos+n : s.pos+n]
	s.pos += n
	s.n++
	s.more = s.inArray
	return schema.RawDocument{JSON: doc, Line: line}, nil
}

// tooLarge is the error for a document over the stream's limit.
func (s *docStream) tooLarge() error {
	return sluice.Errorf(sluice.CodeTooLarge, "document %d is larger than %d bytes, the most max_body_bytes allows for one document of an NDJSON stream", s.n, s.maxDoc)
}

// notClosed is the error for a body that ends inside its array.
func (s *docStream) notClosed() error {
	return sluice.Errorf(sluice.CodeInvalid, "document %d: unexpected end of input: the JSON array is not closed", s.n)
}

// valueLen returns the length of the object or array starting at buf[pos],
// reading more of the body as needed. It follows strings (with their
// escapes) and nesting only: for valid JSON that finds the value's end,
// and anything else is refused when the document's syntax is checked.
func (s *docStream) valueLen() (int, error) {
	depth, inString, escaped := 0, false, false
	i := s.pos
	for {
		b := s.buf
		for ; i < len(b); i++ {
			c := b[i]
			if inString {
				switch {
				case escaped:
					escaped = false
				case c == '\\':
					escaped = true
				case c == '"':
					inString = false
				}
				continue
			}
			switch c {
			case '"':
				inString = true
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1 - s.pos, nil
				}
			}
		}
		off := i - s.pos
		if err := s.fill(); err != nil {
			return 0, err
		}
		i = s.pos + off
	}
}

// expectEOF checks that only whitespace follows the closing ] of an array
// and returns io.EOF.
func (s *docStream) expectEOF() error {
	_, err := s.peek()
	switch {
	case errors.Is(err, io.EOF):
		return io.EOF
	case err != nil:
		return bodyError(err)
	}
	return sluice.Errorf(sluice.CodeInvalid, "unexpected data after the JSON array")
}

func bodyError(err error) error {
	if _, ok := errors.AsType[*sluice.Error](err); ok {
		return err // already says what is wrong
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errBodyTooLarge(mbe.Limit)
	}
	// encoding/json's own text names Go types ("Go struct field .schema
	// of type string"): the error says it in words.
	return sluice.DecodeError(err)
}

// decodeJSON decodes a small JSON request body into v, rejecting unknown
// fields and trailing data.
func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return sluice.Errorf(sluice.CodeInvalid, "the request body is empty: expected a JSON object")
		}
		return bodyError(err)
	}
	// Token, not More: an error reading the rest (a body that ends in
	// invalid UTF-8) is an error, not the end.
	switch _, err := dec.Token(); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		if _, ok := errors.AsType[*sluice.Error](err); ok {
			return err
		}
	}
	return sluice.Errorf(sluice.CodeInvalid, "unexpected data after the JSON body")
}

// smallBodyMax bounds the bodies that are one small JSON object: a
// user, an organization, a password, a role, a token's name, a stream
// ticket's database, a log retention, a webhook action's position or
// grace. Their fields are bounded far below it (names 63 bytes,
// passwords 72, a token name 256, six times that written in \u escapes),
// so a body past it is refused before it is read, rather than after
// max_body_bytes (megabytes) of it were read and decoded to find a field
// too long.
const smallBodyMax = 8 << 10

// webhookBodyMax bounds a webhook's settings (POST and PATCH
// /api/webhooks/…): a URL of at most 2 KiB, a description of 1 KiB, a
// filter of 64 KiB and a list of classes (names of 63 bytes, 1,000 of
// them at most), with room for \u escapes. Read whole, max_body_bytes of
// them decoded to tens of millions of strings.
const webhookBodyMax = 512 << 10

// errRouteBodyTooLarge is the error of a body over max, the most its route
// takes (what: what the route's body is).
func errRouteBodyTooLarge(max int64, what string) error {
	return sluice.Errorf(sluice.CodeTooLarge, "the request body is larger than %d bytes, the most this route takes (%s)", max, what)
}

// decodeSmallJSON decodes a small JSON object body into v, as decodeJSON,
// reading at most smallBodyMax bytes of it (decodeJSONWithin).
func decodeSmallJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeJSONWithin(w, r, v, smallBodyMax, "a small JSON object")
}

// readWithin reads r's body whole, at most max bytes of it, refusing a
// body past max as decodeJSONWithin does (what: what the route's body is).
func readWithin(w http.ResponseWriter, r *http.Request, max int64, what string) ([]byte, error) {
	if r.ContentLength > max {
		// Not read: net/http must close an HTTP/1 connection, not read
		// the body to reuse it (over HTTP/2 the stream's body is ended
		// alone; Connection: close there would close every stream of
		// the connection).
		if r.ProtoMajor == 1 {
			w.Header().Set("Connection", "close")
		}
		return nil, errRouteBodyTooLarge(max, what)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		// A lower max_body_bytes fails first, and names itself.
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok && mbe.Limit >= max {
			return nil, errRouteBodyTooLarge(max, what)
		}
		return nil, bodyError(err)
	}
	return b, nil
}

// decodeJSONWithin decodes a JSON body into v, as decodeJSON, reading at
// most max bytes of it: a body whose Content-Length is over the limit is
// refused before any of it is read (a client that sent Expect:
// 100-continue never sends it), one without a Content-Length once it
// passes the limit. Either way the connection is closed after the answer
// rather than the rest of the body read.
func decodeJSONWithin(w http.ResponseWriter, r *http.Request, v any, max int64, what string) error {
	b, err := readWithin(w, r, max, what)
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	if err := decodeJSON(r, v); err != nil {
		return err
	}
	// encoding/json kept the last of a member given twice, and matched
	// the struct's fields ignoring case ("schema", "Schema").
	if rep, ok := jsondup.FindFold(b); ok {
		return sluice.Errorf(sluice.CodeInvalid, "invalid JSON: %s", rep.Message())
	}
	return nil
}
