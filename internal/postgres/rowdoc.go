package postgres

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// Reading a document transcodes its row, as to_jsonb (or row_to_json)
// gives it, straight to the document's API form: one scan of the text, no
// Go value per JSON value. It produces the bytes DocumentJSON(c,
// rowToDocument(c, decodeRow(raw))) does, with the same rules (see
// rowToDocument, fromColumn, normalizeElem; FuzzRowDocumentMatches holds
// the two to each other): fields in the class's order, null and unknown
// columns left out, a value its field's type cannot hold left out and
// named unreadable, lists, subdocuments and JSON values re-encoded as
// encoding/json encodes them decoded (object keys sorted by byte order,
// the last of a repeated key kept, strings escaped its way, numbers as
// written). decodeRow and rowToDocument stay for readers that need the
// document's values (GraphQL).

// maxRowDepth is the deepest a row may nest arrays and objects, its own
// object counted: encoding/json's limit, which decodeRow had.
const maxRowDepth = 10000

// rowDoc is a row transcoded by transcodeRow.
type rowDoc struct {
	JSON []byte // the document's API form
	// ID is the document's id when Unreadable is not empty (for the log
	// of db.unreadable), "" otherwise.
	ID      string
	Version string // the row's version, when asked for and it has one
	// Unreadable names, in the class's order, the fields whose values
	// their types cannot hold, left out of JSON.
	Unreadable []string
}

var (
	errUnreadable = errors.New("a value its field's type cannot hold")
	errMovedMuch  = errors.New("too many bytes of objects reordered")
	errDeepRow    = fmt.Errorf("row JSON nests more than %d levels", maxRowDepth)
)

// rowSyntaxError is the error of row text that is not JSON.
type rowSyntaxError struct {
	offset int
	what   string
}

func (e *rowSyntaxError) Error() string {
	return fmt.Sprintf("row JSON: %s at offset %d", e.what, e.offset)
}

func syntaxErr(i int, what string) error { return &rowSyntaxError{offset: i, what: what} }

// field states of a row's columns
const (
	colAbsent     = iota // no column, or null
	colValue             // transcoded into rowTranscoder.out[start:end]
	colUnreadable        // a value its field's type cannot hold
)

type colSpan struct {
	state      uint8
	start, end int
}

// objMember is a member of an object being re-encoded: its decoded key
// and where its `"key":value` text is in rowTranscoder.out.
type objMember struct {
	key        []byte
	start, end int
}

type rowTranscoder struct {
	in      []byte
	out     []byte // the columns' values, in the row's order
	tmp     []byte // for reordering an object's members
	members []objMember
	// Counting values (a row longer than schema.MaxValues bytes, which
	// may hold a column of more): budget is what the column may still
	// hold.
	count  bool
	budget int
	// moved counts the bytes of objects reordered, at every depth: past
	// maxMoved, the row is read through Go values instead (decodedRowDoc).
	// A big value under many levels of objects whose keys are not in Go's
	// order would otherwise be moved once for each level.
	moved, maxMoved int
}

// transcoders holds rowTranscoders for reuse (their buffers), small ones
// only.
var transcoders = sync.Pool{New: func() any { return new(rowTranscoder) }}

const keptScratch = 64 << 10

// transcodeRow returns the document of class c in raw, a row of its table
// as to_jsonb or row_to_json gives it, in API form, with its "@version"
// when versioned is set (as rowJSON reads it); see rowDoc. The error is
// that of raw not being a JSON object.
func transcodeRow(c *sluice.Class, raw []byte, versioned bool) (rowDoc, error) {
	t := transcoders.Get().(*rowTranscoder)
	defer func() {
		t.in = nil
		clear(t.members[:cap(t.members)]) // their keys are in the row
		t.members = t.members[:0]
		if cap(t.out) <= keptScratch && cap(t.tmp) <= keptScratch {
			transcoders.Put(t)
		}
	}()
	t.in, t.out, t.tmp = raw, t.out[:0], t.tmp[:0]
	t.moved, t.maxMoved = 0, 8*len(raw)+64<<10
	if cap(t.out) < len(raw) {
		t.out = make([]byte, 0, len(raw)) // a document is seldom longer than its row
	}
	t.count = len(raw) > schema.MaxValues // a value takes a byte at least

	var spanBuf [32]colSpan
	var spans []colSpan
	if len(c.Fields) > len(spanBuf) {
		spans = make([]colSpan, len(c.Fields))
	} else {
		spans = spanBuf[:len(c.Fields)]
	}
	var idTok, uidTok []byte // the last _id and _commit_uid, as written
	idKind := 0

	in := raw
	i := skipSpace(in, 0)
	if i < len(in) && in[i] == 'n' {
		// A null row decodes into a nil map: a document without fields.
		if !bytes.HasPrefix(in[i:], []byte("null")) {
			return rowDoc{}, syntaxErr(i, "invalid literal")
		}
		return t.assemble(c, spans, nil, 0, nil, versioned)
	}
	if i >= len(in) || in[i] != '{' {
		return rowDoc{}, syntaxErr(i, "row is not an object")
	}
	i = skipSpace(in, i+1)
	if i < len(in) && in[i] == '}' {
		return t.assemble(c, spans, nil, 0, nil, versioned)
	}
	for {
		if i >= len(in) || in[i] != '"' {
			return rowDoc{}, syntaxErr(i, "expected a column name")
		}
		kend, kind, err := scanString(in, i)
		if err != nil {
			return rowDoc{}, err
		}
		key, err := stringContent(in[i:kend], kind)
		if err != nil {
			return rowDoc{}, err
		}
		i = skipSpace(in, kend)
		if i >= len(in) || in[i] != ':' {
			return rowDoc{}, syntaxErr(i, "expected ':'")
		}
		i = skipSpace(in, i+1)
		if i >= len(in) {
			return rowDoc{}, syntaxErr(i, "unexpected end")
		}
		switch fi := fieldIndex(c, key); {
		case string(key) == colID:
			end, err := skipValue(in, i)
			if err != nil {
				return rowDoc{}, err
			}
			idTok, idKind = nil, 0
			if in[i] == '"' {
				_, k, err := scanString(in, i)
				if err != nil {
					return rowDoc{}, err
				}
				idTok, idKind = in[i:end], k
			}
			i = end
		case string(key) == colCommitUID:
			end, err := skipValue(in, i)
			if err != nil {
				return rowDoc{}, err
			}
			uidTok = nil
			if c := in[i]; c == '-' || '0' <= c && c <= '9' {
				uidTok = in[i:end]
			}
			i = end
		case fi < 0: // a column the class lacks
			if i, err = skipValue(in, i); err != nil {
				return rowDoc{}, err
			}
		case in[i] == 'n':
			if !bytes.HasPrefix(in[i:], []byte("null")) {
				return rowDoc{}, syntaxErr(i, "invalid literal")
			}
			spans[fi] = colSpan{}
			i += len("null")
		default:
			start := len(t.out)
			t.budget = schema.MaxValues
			end, err := t.column(i, c.Fields[fi])
			switch {
			case err == nil:
				spans[fi] = colSpan{state: colValue, start: start, end: len(t.out)}
				i = end
			case err == errUnreadable || err == errTooManyValues:
				t.out = t.out[:start]
				spans[fi] = colSpan{state: colUnreadable}
				if i, err = skipValue(in, i); err != nil {
					return rowDoc{}, err
				}
			case err == errMovedMuch:
				return decodedRowDoc(c, raw, versioned)
			default:
				return rowDoc{}, err
			}
		}
		i = skipSpace(in, i)
		if i < len(in) && in[i] == ',' {
			i = skipSpace(in, i+1)
			continue
		}
		if i < len(in) && in[i] == '}' {
			break // what follows is not read, as json.Decoder does not
		}
		return rowDoc{}, syntaxErr(i, "expected ',' or '}'")
	}
	return t.assemble(c, spans, idTok, idKind, uidTok, versioned)
}

// decodedRowDoc is transcodeRow through Go values (decodeRow,
// rowToDocument, DocumentJSON): what reading a row cost before, about 140
// bytes and 150 ns a value, for the rare row it is cheaper for.
func decodedRowDoc(c *sluice.Class, raw []byte, versioned bool) (rowDoc, error) {
	row, err := decodeRow(raw)
	if err != nil {
		return rowDoc{}, err
	}
	doc, unreadable := rowToDocument(c, row)
	if versioned {
		doc.Version = rowVersion(row)
	}
	b, err := DocumentJSON(c, doc)
	if err != nil {
		return rowDoc{}, err
	}
	d := rowDoc{JSON: b, Version: doc.Version, Unreadable: unreadable}
	if len(unreadable) > 0 {
		d.ID = doc.ID
	}
	return d, nil
}

// fieldIndex returns the index of the field of c named key, or -1.
func fieldIndex(c *sluice.Class, key []byte) int {
	for i, f := range c.Fields {
		if len(f.Name) == len(key) && f.Name == string(key) {
			return i
		}
	}
	return -1
}

// assemble returns the document of a row scanned: the columns' values in
// t.out at spans, its id and version as written (nil: none of that type).
func (t *rowTranscoder) assemble(c *sluice.Class, spans []colSpan, idTok []byte, idKind int, uidTok []byte, versioned bool) (rowDoc, error) {
	var d rowDoc
	if versioned && uidTok != nil {
		if uid, err := strconv.ParseInt(string(uidTok), 10, 64); err == nil {
			d.Version = sluice.VersionOf(uid)
		}
	}
	size := len(`{"@id":"","@type":"","@version":""}`) + len(idTok) + len(c.Name) + len(d.Version)
	for i, f := range c.Fields {
		if spans[i].state == colValue {
			size += len(`,"":`) + len(f.Name) + spans[i].end - spans[i].start
		}
	}
	buf := make([]byte, 0, size)
	buf = append(buf, `{"@id":`...)
	if idTok == nil {
		buf = append(buf, `""`...)
	} else {
		var err error
		if buf, err = appendStringToken(buf, idTok, idKind); err != nil {
			return rowDoc{}, err
		}
	}
	buf = append(buf, `,"@type":`...)
	buf = appendJSONString(buf, c.Name)
	if d.Version != "" {
		buf = append(buf, `,"@version":`...)
		buf = appendJSONString(buf, d.Version)
	}
	for i, f := range c.Fields {
		switch spans[i].state {
		case colValue:
			buf = append(buf, ',')
			buf = appendJSONString(buf, f.Name)
			buf = append(buf, ':')
			buf = append(buf, t.out[spans[i].start:spans[i].end]...)
		case colUnreadable:
			d.Unreadable = append(d.Unreadable, f.Name)
		}
	}
	d.JSON = append(buf, '}')
	if len(d.Unreadable) > 0 && idTok != nil {
		id, err := stringContent(idTok, idKind)
		if err != nil {
			return rowDoc{}, err
		}
		d.ID = string(id)
	}
	return d, nil
}

// tick counts a value of the column being read, when counting.
func (t *rowTranscoder) tick() error {
	if t.count {
		if t.budget--; t.budget < 0 {
			return errTooManyValues
		}
	}
	return nil
}

// column appends the API form of the value at t.in[i] (not null) of field
// f's column, as fromColumn and appendJSONValue make it, and returns the
// index past it; errUnreadable (or errTooManyValues) when the value is one
// f's type cannot hold.
func (t *rowTranscoder) column(i int, f *sluice.Field) (int, error) {
	if err := t.tick(); err != nil {
		return 0, err
	}
	const depth = 1 // the row's object
	if columnType(f) == "jsonb" {
		if f.Type.Kind == sluice.TypeScalar && f.Type.Name == sluice.ScalarJSON && !f.List {
			return t.value(i, depth)
		}
		if !f.List {
			return t.elem(i, f, depth)
		}
		return t.list(i, f, depth)
	}
	switch f.Type.Name {
	case sluice.ScalarInt:
		return t.integer(i, 64) // an integer column
	case sluice.ScalarFloat:
		return t.float(i)
	case sluice.ScalarDateTime:
		if t.in[i] != '"' {
			return 0, errUnreadable // read as "", which no time is
		}
		return t.dateTime(i)
	case sluice.ScalarBigInt:
		return t.bigIntNumber(i)
	}
	return t.value(i, depth)
}

// list appends the list at t.in[i] of list field f, in a container at
// depth, as normalizeJSON makes it.
func (t *rowTranscoder) list(i int, f *sluice.Field, depth int) (int, error) {
	if t.in[i] != '[' {
		return 0, errUnreadable
	}
	elem := *f
	elem.List = false
	return t.array(i, depth, &elem)
}

// elem appends the value at t.in[i] (not null) of type f (a list's
// element type, or a subdocument field), in a container at depth, as
// normalizeElem makes it.
func (t *rowTranscoder) elem(i int, f *sluice.Field, depth int) (int, error) {
	c := t.in[i]
	switch f.Type.Kind {
	case sluice.TypeSubdocument:
		if c != '{' {
			return 0, errUnreadable
		}
		return t.object(i, depth)
	case sluice.TypeEnum, sluice.TypeReference:
		if c != '"' {
			return 0, errUnreadable
		}
		return t.string(i)
	case sluice.TypeScalar:
		switch f.Type.Name {
		case sluice.ScalarJSON:
			return t.value(i, depth)
		case sluice.ScalarInt:
			return t.integer(i, 32) // an Int in JSON: checked to 32 bits
		case sluice.ScalarFloat:
			return t.float(i)
		case sluice.ScalarBoolean:
			if c != 't' && c != 'f' {
				return 0, errUnreadable
			}
			return t.value(i, depth)
		case sluice.ScalarDateTime:
			if c != '"' {
				return 0, errUnreadable
			}
			return t.dateTime(i)
		case sluice.ScalarBigInt:
			if c == '"' {
				end, kind, err := scanString(t.in, i)
				if err != nil {
					return 0, err
				}
				s, err := stringContent(t.in[i:end], kind)
				if err != nil {
					return 0, err
				}
				if !isInteger(string(s)) {
					return 0, errUnreadable
				}
				t.out = appendEscaped(t.out, s)
				return end, nil
			}
			return t.bigIntNumber(i)
		case sluice.ScalarString, sluice.ScalarID:
			if c != '"' {
				return 0, errUnreadable
			}
			return t.string(i)
		}
	}
	return t.value(i, depth)
}

// integer appends the whole number at t.in[i], within bits bits, as
// strconv formats it; errUnreadable when it is none.
func (t *rowTranscoder) integer(i, bits int) (int, error) {
	end, isInt, err := t.number(i)
	if err != nil {
		return 0, err
	}
	n, err := parseInt(t.in[i:end], isInt, bits)
	if err != nil {
		return 0, errUnreadable
	}
	t.out = strconv.AppendInt(t.out, n, 10)
	return end, nil
}

// bigIntNumber appends the whole number at t.in[i] as a BigInt's
// normalized form, a JSON string of its digits; errUnreadable when it is
// none.
func (t *rowTranscoder) bigIntNumber(i int) (int, error) {
	end, isInt, err := t.number(i)
	if err != nil {
		return 0, err
	}
	if !isInt {
		return 0, errUnreadable
	}
	t.out = append(t.out, '"')
	t.out = append(t.out, t.in[i:end]...)
	t.out = append(t.out, '"')
	return end, nil
}

// number scans the number at t.in[i] and returns the index past it and
// whether it is an integer (no fraction, no exponent); errUnreadable when
// t.in[i] starts no number.
func (t *rowTranscoder) number(i int) (int, bool, error) {
	if c := t.in[i]; c != '-' && (c < '0' || c > '9') {
		return 0, false, errUnreadable
	}
	return scanNumber(t.in, i)
}

// float appends the Float at t.in[i] as encoding/json encodes a float64.
func (t *rowTranscoder) float(i int) (int, error) {
	end, _, err := t.number(i)
	if err != nil {
		return 0, err
	}
	x, err := strconv.ParseFloat(string(t.in[i:end]), 64)
	if err != nil {
		return 0, errUnreadable // out of range
	}
	t.out = appendFloat(t.out, unsigned(x))
	return end, nil
}

// dateTime appends the DateTime of the string at t.in[i] as
// dateTimeValue normalizes it.
func (t *rowTranscoder) dateTime(i int) (int, error) {
	end, kind, err := scanString(t.in, i)
	if err != nil {
		return 0, err
	}
	s, err := stringContent(t.in[i:end], kind)
	if err != nil {
		return 0, err
	}
	tm, err := time.Parse(time.RFC3339Nano, string(s))
	if err != nil {
		return 0, errUnreadable
	}
	tm = tm.UTC()
	if tm.Year() < 1 || tm.Year() > 9999 {
		return 0, errUnreadable
	}
	// As checkedTime's text: nothing in it to escape.
	t.out = append(t.out, '"')
	t.out = tm.AppendFormat(t.out, time.RFC3339Nano)
	t.out = append(t.out, '"')
	return end, nil
}

// value appends the JSON value at t.in[i], in a container at depth, as
// encoding/json encodes it decoded (with UseNumber), and returns the
// index past it.
func (t *rowTranscoder) value(i, depth int) (int, error) {
	if i >= len(t.in) {
		return 0, syntaxErr(i, "unexpected end")
	}
	switch c := t.in[i]; c {
	case '{':
		return t.object(i, depth)
	case '[':
		return t.array(i, depth, nil)
	case '"':
		return t.string(i)
	case 't', 'f', 'n':
		lit := "null"
		if c == 't' {
			lit = "true"
		} else if c == 'f' {
			lit = "false"
		}
		if !bytes.HasPrefix(t.in[i:], []byte(lit)) {
			return 0, syntaxErr(i, "invalid literal")
		}
		t.out = append(t.out, lit...)
		return i + len(lit), nil
	}
	end, _, err := scanNumber(t.in, i)
	if err != nil {
		return 0, err
	}
	t.out = append(t.out, t.in[i:end]...)
	return end, nil
}

// string appends the string at t.in[i] as encoding/json encodes it
// decoded.
func (t *rowTranscoder) string(i int) (int, error) {
	end, kind, err := scanString(t.in, i)
	if err != nil {
		return 0, err
	}
	t.out, err = appendStringToken(t.out, t.in[i:end], kind)
	return end, err
}

// array appends the array at t.in[i], in a container at depth: its
// elements of type elem as normalizeElem makes them (a list's: a null
// one is unreadable), or any JSON values when elem is nil.
func (t *rowTranscoder) array(i, depth int, elem *sluice.Field) (int, error) {
	if depth++; depth > maxRowDepth {
		return 0, errDeepRow
	}
	t.out = append(t.out, '[')
	i = skipSpace(t.in, i+1)
	if i < len(t.in) && t.in[i] == ']' {
		t.out = append(t.out, ']')
		return i + 1, nil
	}
	for {
		if i >= len(t.in) {
			return 0, syntaxErr(i, "unexpected end")
		}
		if err := t.tick(); err != nil {
			return 0, err
		}
		var err error
		switch {
		case elem == nil:
			i, err = t.value(i, depth)
		case t.in[i] == 'n': // a null element
			err = errUnreadable
		default:
			i, err = t.elem(i, elem, depth)
		}
		if err != nil {
			return 0, err
		}
		i = skipSpace(t.in, i)
		if i < len(t.in) && t.in[i] == ',' {
			t.out = append(t.out, ',')
			i = skipSpace(t.in, i+1)
			continue
		}
		if i < len(t.in) && t.in[i] == ']' {
			t.out = append(t.out, ']')
			return i + 1, nil
		}
		return 0, syntaxErr(i, "expected ',' or ']'")
	}
}

// object appends the object at t.in[i], in a container at depth, with
// its members in byte order of their decoded keys, the last of a repeated
// key kept (as a Go map has it). Members are written in the order read;
// an object whose keys are not already in order (Postgres orders them by
// length first) is then reordered in place.
func (t *rowTranscoder) object(i, depth int) (int, error) {
	if depth++; depth > maxRowDepth {
		return 0, errDeepRow
	}
	start := len(t.out)
	t.out = append(t.out, '{')
	i = skipSpace(t.in, i+1)
	if i < len(t.in) && t.in[i] == '}' {
		t.out = append(t.out, '}')
		return i + 1, nil
	}
	base := len(t.members)
	defer func() { t.members = t.members[:base] }()
	ordered := true
	var prev []byte
	for n := 0; ; n++ {
		if i >= len(t.in) || t.in[i] != '"' {
			return 0, syntaxErr(i, "expected a key")
		}
		kend, kind, err := scanString(t.in, i)
		if err != nil {
			return 0, err
		}
		key, err := stringContent(t.in[i:kend], kind)
		if err != nil {
			return 0, err
		}
		if n > 0 {
			t.out = append(t.out, ',')
			if bytes.Compare(prev, key) >= 0 {
				ordered = false
			}
		}
		prev = key
		mstart := len(t.out)
		if kind == strDecode {
			t.out = appendEscaped(t.out, key)
		} else if t.out, err = appendStringToken(t.out, t.in[i:kend], kind); err != nil {
			return 0, err
		}
		t.out = append(t.out, ':')
		i = skipSpace(t.in, kend)
		if i >= len(t.in) || t.in[i] != ':' {
			return 0, syntaxErr(i, "expected ':'")
		}
		i = skipSpace(t.in, i+1)
		if err := t.tick(); err != nil {
			return 0, err
		}
		if i, err = t.value(i, depth); err != nil {
			return 0, err
		}
		t.members = append(t.members, objMember{key: key, start: mstart, end: len(t.out)})
		i = skipSpace(t.in, i)
		if i < len(t.in) && t.in[i] == ',' {
			i = skipSpace(t.in, i+1)
			continue
		}
		if i < len(t.in) && t.in[i] == '}' {
			i++
			break
		}
		return 0, syntaxErr(i, "expected ',' or '}'")
	}
	if ordered {
		t.out = append(t.out, '}')
		return i, nil
	}
	if t.moved += len(t.out) - start; t.moved > t.maxMoved {
		return 0, errMovedMuch
	}
	ms := t.members[base:]
	slices.SortStableFunc(ms, func(a, b objMember) int { return bytes.Compare(a.key, b.key) })
	t.tmp = append(t.tmp[:0], '{')
	for k, m := range ms {
		if k+1 < len(ms) && bytes.Equal(m.key, ms[k+1].key) {
			continue // a later member of the same key replaces it
		}
		if len(t.tmp) > 1 {
			t.tmp = append(t.tmp, ',')
		}
		t.tmp = append(t.tmp, t.out[m.start:m.end]...)
	}
	t.tmp = append(t.tmp, '}')
	t.out = append(t.out[:start], t.tmp...)
	return i, nil
}

// String kinds, by what their text needs to be re-encoded.
const (
	strPlain  = iota // copied as it is
	strEscape        // valid UTF-8 without escapes: some bytes to escape
	strDecode        // escapes or invalid UTF-8: decoded first
)

// scanString returns the index past the string whose opening quote is at
// b[i], and its kind.
func scanString(b []byte, i int) (int, int, error) {
	kind, high := strPlain, false
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			if high && kind == strEscape && !utf8.Valid(b[i+1:j]) {
				kind = strDecode
			}
			return j + 1, kind, nil
		case c == '\\':
			kind = strDecode
			j++ // what it escapes; checked when decoded
		case c < 0x20:
			return 0, 0, syntaxErr(j, "control character in a string")
		case c >= utf8.RuneSelf:
			high = true
			fallthrough
		case c == '<' || c == '>' || c == '&':
			if kind == strPlain {
				kind = strEscape
			}
		}
	}
	return 0, 0, syntaxErr(len(b), "unterminated string")
}

// stringContent returns the decoded text of tok, a string token of kind.
func stringContent(tok []byte, kind int) ([]byte, error) {
	if kind != strDecode {
		return tok[1 : len(tok)-1], nil
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return nil, fmt.Errorf("row JSON: %w", err)
	}
	return []byte(s), nil
}

// appendStringToken appends tok, a string token of kind, as
// encoding/json encodes it decoded.
func appendStringToken(buf, tok []byte, kind int) ([]byte, error) {
	switch kind {
	case strPlain:
		return append(buf, tok...), nil
	case strEscape:
		return appendEscaped(buf, tok[1:len(tok)-1]), nil
	}
	s, err := stringContent(tok, kind)
	if err != nil {
		return buf, err
	}
	return appendEscaped(buf, s), nil
}

const hexDigits = "0123456789abcdef"

// appendEscaped appends s quoted as encoding/json's Marshal does (HTML
// characters, U+2028 and U+2029 escaped, invalid UTF-8 as \ufffd).
func appendEscaped(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRune(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// scanNumber returns the index past the JSON number at b[i] and whether
// it is an integer (no fraction, no exponent).
func scanNumber(b []byte, i int) (int, bool, error) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && '1' <= b[j] && b[j] <= '9':
		for j++; j < len(b) && '0' <= b[j] && b[j] <= '9'; j++ {
		}
	default:
		return 0, false, syntaxErr(j, "invalid value")
	}
	isInt := true
	if j < len(b) && b[j] == '.' {
		isInt = false
		j++
		k := j
		for ; j < len(b) && '0' <= b[j] && b[j] <= '9'; j++ {
		}
		if j == k {
			return 0, false, syntaxErr(j, "invalid number")
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		isInt = false
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		k := j
		for ; j < len(b) && '0' <= b[j] && b[j] <= '9'; j++ {
		}
		if j == k {
			return 0, false, syntaxErr(j, "invalid number")
		}
	}
	return j, isInt, nil
}

// parseInt returns the value of s, a JSON number (an integer when isInt),
// as strconv.ParseInt(s, 10, bits) does.
func parseInt(s []byte, isInt bool, bits int) (int64, error) {
	if !isInt {
		return 0, errUnreadable
	}
	digits := s
	if s[0] == '-' {
		digits = s[1:]
	}
	if len(digits) > 18 {
		return strconv.ParseInt(string(s), 10, bits)
	}
	var n int64
	for _, d := range digits {
		n = n*10 + int64(d-'0')
	}
	if s[0] == '-' {
		n = -n
	}
	if bits == 32 && (n < math.MinInt32 || n > math.MaxInt32) {
		return 0, errUnreadable
	}
	return n, nil
}

// appendFloat appends x as encoding/json encodes a float64 (x finite).
func appendFloat(b []byte, x float64) []byte {
	abs := math.Abs(x)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, x, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the index past the value at b[i] (after white
// space), reading no more of it than where it ends: a column not read, or
// one unreadable. It does not check all of the value's syntax.
func skipValue(b []byte, i int) (int, error) {
	i = skipSpace(b, i)
	if i >= len(b) {
		return 0, syntaxErr(i, "unexpected end")
	}
	switch b[i] {
	case '"':
		end, _, err := scanString(b, i)
		return end, err
	case '{', '[':
	case 't', 'f', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		j := i
		for j < len(b) && (b[j] >= 'a' && b[j] <= 'z' || b[j] >= '0' && b[j] <= '9' || b[j] == '.' || b[j] == '+' || b[j] == '-' || b[j] == 'E') {
			j++
		}
		return j, nil
	default:
		return 0, syntaxErr(i, "invalid value")
	}
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			end, _, err := scanString(b, j)
			if err != nil {
				return 0, err
			}
			j = end - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, syntaxErr(len(b), "unexpected end")
}
