package graph

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// jsonWriter builds a response's JSON directly in resolution order, which
// is the order GraphQL requires (the selection order).
type jsonWriter struct {
	bytes.Buffer
}

const hexDigits = "0123456789abcdef"

// str writes s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does.
func (w *jsonWriter) str(s string) {
	w.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
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

// any writes v with encoding/json (JSON scalar values, rare types).
func (w *jsonWriter) any(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		w.null()
		return
	}
	w.Write(b)
}
