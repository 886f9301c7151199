package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// jsonWriter builds a response's JSON directly in resolution order, which
// is the order GraphQL requires (the selection order).
//
// With max > 0 it holds at most max bytes: a write that would go past it
// is dropped and sets over, and so is every write after it, so that a
// response's memory is bounded whatever the data. The writer's content is
// then incomplete; whoever set max checks over and reports the error.
// Write, WriteString and WriteByte shadow bytes.Buffer's to apply it.
type jsonWriter struct {
	bytes.Buffer
	max  int
	over bool
	// reserved counts bytes sent with the response but not written
	// here (its errors, reserve), against max.
	reserved int
}

// errWriterFull is what writes past a jsonWriter's max return (callers
// check over instead).
var errWriterFull = errors.New("graph: response bytes limit reached")

// room reports whether n more bytes fit, and records when they do not.
func (w *jsonWriter) room(n int) bool {
	if w.over {
		return false
	}
	if w.max > 0 && w.Len()+w.reserved+n > w.max {
		w.over = true
		return false
	}
	return true
}

// reserve counts n bytes of the response written elsewhere against max,
// as a write of them would (it sets over past it): a response's errors
// are sent with its data.
func (w *jsonWriter) reserve(n int) {
	if w.room(n) {
		w.reserved += n
	}
}

func (w *jsonWriter) Write(p []byte) (int, error) {
	if !w.room(len(p)) {
		return 0, errWriterFull
	}
	return w.Buffer.Write(p)
}

func (w *jsonWriter) WriteString(s string) (int, error) {
	if !w.room(len(s)) {
		return 0, errWriterFull
	}
	return w.Buffer.WriteString(s)
}

func (w *jsonWriter) WriteByte(c byte) error {
	if !w.room(1) {
		return errWriterFull
	}
	return w.Buffer.WriteByte(c)
}

const hexDigits = "0123456789abcdef"

// str writes s as a JSON string, as encoding/json.Marshal writes one:
// invalid UTF-8 becomes U+FFFD, and <, > and & are escaped (\u003c …),
// so that a response needs no pass of encoding/json's over its data
// (MarshalResponse).
func (w *jsonWriter) str(s string) {
	w.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			w.WriteString(s[start:i])
			switch c {
			case '"', '\\':
				w.WriteByte('\\')
				w.WriteByte(c)
			case '\n':
				w.WriteString(`\n`)
			case '\r':
				w.WriteString(`\r`)
			case '\t':
				w.WriteString(`\t`)
			default:
				w.WriteString(`\u00`)
				w.WriteByte(hexDigits[c>>4])
				w.WriteByte(hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			w.WriteString(s[start:i])
			w.WriteString(`\ufffd`)
			i += size
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but break JavaScript eval.
		if r == '\u2028' || r == '\u2029' {
			w.WriteString(s[start:i])
			w.WriteString(`\u202`)
			w.WriteByte(hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	w.WriteString(s[start:])
	w.WriteByte('"')
}

// key writes a JSON object key and its colon, preceded by a comma unless
// first.
func (w *jsonWriter) key(k string, first bool) {
	if !first {
		w.WriteByte(',')
	}
	w.str(k)
	w.WriteByte(':')
}

func (w *jsonWriter) null() { w.WriteString("null") }

func (w *jsonWriter) boolean(b bool) { w.WriteString(strconv.FormatBool(b)) }

func (w *jsonWriter) int(n int64) { w.WriteString(strconv.FormatInt(n, 10)) }

// any writes v with encoding/json (JSON scalar values, rare types); null
// when it cannot (a json.RawMessage that is not JSON).
func (w *jsonWriter) any(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		w.null()
		return
	}
	w.Write(b)
}
