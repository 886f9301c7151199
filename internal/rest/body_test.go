package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

func readAll(body string) ([]schema.RawDocument, error) {
	return readFrom(strings.NewReader(body))
}

// readFrom reads every document from r, copying each (a document's text is
// valid only until the next one is read).
func readFrom(r io.Reader) ([]schema.RawDocument, error) {
	return readSized(r, -1)
}

// readSized is readFrom with the body's length given (-1: not known), as
// a request's Content-Length gives it.
func readSized(r io.Reader, size int64) ([]schema.RawDocument, error) {
	s, err := newDocStream(r, 0, size)
	if err != nil {
		return nil, err
	}
	var out []schema.RawDocument
	for {
		m, err := s.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, schema.RawDocument{JSON: bytes.Clone(m.JSON)})
	}
}

func TestDocStream(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body string
		n    int
		err  string
	}{
		{`{"a":1}`, 1, ""},
		{` [ {"a":1} , {"b":2} ] `, 2, ""},
		{"{\"a\":1}\n{\"b\":2}\n\n{\"c\":3}", 3, ""},
		{`[]`, 0, ""},
		{``, 0, "the request body is empty"},
		{`   `, 0, "the request body is empty"},
		{`5`, 0, "must be a JSON object"},
		{`[1]`, 0, "document 0: not a JSON object"},
		{`[{"a":1},`, 1, "unexpected end of input"},
		{`[{"a":1}] x`, 1, "unexpected data after the JSON array"},
		{`{"a":1} [2]`, 1, "document 1: not a JSON object"},
		{`{"a":`, 0, "document 0: invalid JSON: it ends before it is complete"},
		{`[{"a":1} {"b":2}]`, 1, "document 1: invalid JSON: an unexpected character '{' after an array element at byte 9 (counting from 0) of the body: a comma or ] comes next"},
		{`[{"a":1},]`, 1, "document 1: invalid JSON: an unexpected character ']' at byte 9 (counting from 0) of the body"},
		{`[{"a":"}"}, {"b":"\"{"}]`, 2, ""},
		{"{\"a\":1}\n}", 1, "document 1: invalid JSON: an unexpected character '}' at byte 8 (counting from 0) of the body, line 2"},
		{`[{"a":1}`, 1, "document 1: unexpected end of input: the JSON array is not closed"},
		{`[{"a":[1,{"b":2}]}]`, 1, ""},
	} {
		docs, err := readAll(c.body)
		sized, serr := readSized(strings.NewReader(c.body), int64(len(c.body)))
		if fmt.Sprint(serr) != fmt.Sprint(err) || !reflect.DeepEqual(sized, docs) {
			t.Errorf("%q: its length known, read %d documents (%v), not knowing it %d (%v)", c.body, len(sized), serr, len(docs), err)
		}
		if len(docs) != c.n {
			t.Errorf("%q: %d documents, want %d", c.body, len(docs), c.n)
		}
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q: error %v, want %q", c.body, err, c.err)
		}
		if err != nil && sluice.ErrorCode(err) != sluice.CodeInvalid {
			t.Errorf("%q: error code %s, want BadRequest", c.body, sluice.ErrorCode(err))
		}
	}
}

// FuzzDocStream feeds arbitrary request bodies to the document reader: it
// must never panic, and every error must be a client error.
func FuzzDocStream(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[{"a":1},{"b":[1,2]}]`, "{}\n{}", `[`, `{"a":"\u0000"}`, `[{}]]`, ` [ {"a":"]\\\"}"} , {"b":[{}]} ] `} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		docs, err := readAll(body)
		if err != nil && sluice.ErrorCode(err) != sluice.CodeInvalid {
			t.Fatalf("%q: error %v is not a BadRequest", body, err)
		}
		// Read a byte at a time, the stream splits the same way.
		docs1, err1 := readFrom(iotest.OneByteReader(strings.NewReader(body)))
		if fmt.Sprint(err1) != fmt.Sprint(err) || !reflect.DeepEqual(docs1, docs) {
			t.Fatalf("%q: one byte at a time read %d documents (%v), at once %d (%v)", body, len(docs1), err1, len(docs), err)
		}
		// Its length known (the first buffer that size), the same.
		for _, r := range []io.Reader{strings.NewReader(body), iotest.OneByteReader(strings.NewReader(body))} {
			docs2, err2 := readSized(r, int64(len(body)))
			if fmt.Sprint(err2) != fmt.Sprint(err) || !reflect.DeepEqual(docs2, docs) {
				t.Fatalf("%q: its length known, read %d documents (%v), not knowing it %d (%v)", body, len(docs2), err2, len(docs), err)
			}
		}
		// A valid JSON array of objects splits into exactly its elements.
		var elems []json.RawMessage
		if json.Unmarshal([]byte(body), &elems) != nil {
			return
		}
		for _, e := range elems {
			if e[0] != '{' {
				return
			}
		}
		if err != nil || len(docs) != len(elems) {
			t.Fatalf("%q: %d documents (%v), want %d", body, len(docs), err, len(elems))
		}
		for i, e := range elems {
			if !bytes.Equal(docs[i].JSON, e) {
				t.Fatalf("%q: document %d is %s, want %s", body, i, docs[i].JSON, e)
			}
		}
	})
}

// TestDocStreamLargeDocuments reads documents larger than the stream's
// buffer, between small ones, whole and a byte at a time.
func TestDocStreamLargeDocuments(t *testing.T) {
	t.Parallel()
	big := `{"a":"` + strings.Repeat(`x\"}{`, 40<<10) + `"}`
	body := `[{"s":1},` + big + `,{"s":2},` + big + `]`
	for _, r := range []io.Reader{strings.NewReader(body), iotest.OneByteReader(strings.NewReader(body))} {
		docs, err := readFrom(r)
		if err != nil || len(docs) != 4 {
			t.Fatalf("%d documents, error %v", len(docs), err)
		}
		if string(docs[1].JSON) != big || string(docs[3].JSON) != big || string(docs[2].JSON) != `{"s":2}` {
			t.Fatalf("documents not split at their ends")
		}
	}
}

// TestDocStreamLimitsEachDocument checks an NDJSON stream's per-document
// limit: the stream may be longer than the limit, a document may not.
func TestDocStreamLimitsEachDocument(t *testing.T) {
	t.Parallel()
	small := `{"a":"` + strings.Repeat("x", 900) + `"}` + "\n"
	big := `{"a":"` + strings.Repeat("x", 1100) + `"}` + "\n"
	read := func(body string) (int, error) {
		s, err := newDocStream(strings.NewReader(body), 1000, -1)
		if err != nil {
			return 0, err
		}
		n := 0
		for {
			if _, err := s.Next(); errors.Is(err, io.EOF) {
				return n, nil
			} else if err != nil {
				return n, err
			}
			n++
		}
	}
	if n, err := read(strings.Repeat(small, 100)); err != nil || n != 100 {
		t.Fatalf("100 documents under the limit: read %d, error %v", n, err)
	}
	n, err := read(small + small + big + small)
	if want := "document 2 is larger than 1000 bytes, the most max_body_bytes allows for one document of an NDJSON stream"; err == nil || err.Error() != want || n != 2 {
		t.Fatalf("read %d, error %v; want 2 and %q", n, err, want)
	}
}

// TestRateTimeDoesNotOverflow: the time a huge body may take at the least
// rate is long, never negative (a float64 of nanoseconds past int64 did
// not convert: a 10 GB NDJSON stream at body_min_rate 1 was cut at once).
func TestRateTimeDoesNotOverflow(t *testing.T) {
	if d := rateTime(10<<30, 1); d < 90*365*24*time.Hour {
		t.Errorf("10 GiB at 1 byte a second: %s", d)
	}
	if d := rateTime(8192, 8192); d != time.Second {
		t.Errorf("8 KiB at 8 KiB a second: %s", d)
	}
}
