package rest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// docStream reads the documents of a write request body: one JSON object,
// a JSON array of objects (streamed element by element), or NDJSON (any
// number of objects separated by whitespace). It implements
// engine.DocSource.
type docStream struct {
	dec     *json.Decoder
	inArray bool
	done    bool
	n       int
}

func newDocStream(body io.Reader) (*docStream, error) {
	br := bufio.NewReader(body)
	first, err := peekNonSpace(br)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, bodyError(err)
	}
	dec := json.NewDecoder(br)
	dec.UseNumber()
	s := &docStream{dec: dec}
	switch {
	case errors.Is(err, io.EOF):
		return nil, sluice.Errorf(sluice.CodeInvalid, "the request body is empty: send a JSON object, an array of objects or NDJSON")
	case first == '[':
		if _, err := dec.Token(); err != nil {
			return nil, bodyError(err)
		}
		s.inArray = true
	case first != '{':
		return nil, sluice.Errorf(sluice.CodeInvalid, "the request body must be a JSON object, an array of objects or NDJSON, not one starting with %q", first)
	}
	return s, nil
}

func peekNonSpace(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			return b, br.UnreadByte()
		}
	}
}

// Next returns the next document's JSON text or io.EOF. The decoder checks
// its syntax; schema.RawDocument reads it.
func (s *docStream) Next() (schema.RawDocument, error) {
	if s.done {
		return schema.RawDocument{}, io.EOF
	}
	if s.inArray && !s.dec.More() {
		if _, err := s.dec.Token(); err != nil { // the closing ]
			return schema.RawDocument{}, bodyError(err)
		}
		s.done = true
		if err := s.expectEOF(); err != nil {
			return schema.RawDocument{}, err
		}
		return schema.RawDocument{}, io.EOF
	}
	var raw json.RawMessage
	if err := s.dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			if !s.inArray {
				s.done = true
				return schema.RawDocument{}, io.EOF
			}
			return schema.RawDocument{}, sluice.Errorf(sluice.CodeInvalid, "document %d: unexpected end of input: the JSON array is not closed", s.n)
		}
		return schema.RawDocument{}, sluice.Errorf(sluice.CodeInvalid, "document %d: invalid JSON: %s", s.n, jsonErrorText(err))
	}
	s.n++
	if raw[0] != '{' { // the decoder skipped any leading space
		return schema.RawDocument{}, sluice.Errorf(sluice.CodeInvalid, "document %d: not a JSON object", s.n-1)
	}
	return schema.RawDocument{JSON: raw}, nil
}

func (s *docStream) expectEOF() error {
	var extra json.RawMessage
	if err := s.dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return sluice.Errorf(sluice.CodeInvalid, "unexpected data after the JSON array")
	}
	return nil
}

func bodyError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return sluice.Errorf(sluice.CodeInvalid, "the request body is larger than %d bytes", mbe.Limit)
	}
	return sluice.Errorf(sluice.CodeInvalid, "invalid JSON body: %s", jsonErrorText(err))
}

func jsonErrorText(err error) string {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return fmt.Sprintf("the request body is larger than %d bytes", mbe.Limit)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	return err.Error()
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
	if dec.More() {
		return sluice.Errorf(sluice.CodeInvalid, "unexpected data after the JSON body")
	}
	return nil
}
